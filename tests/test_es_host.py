"""TorchWeightsHost: scopes, tied weights, exact and in-place restore, updates in fp32."""

import numpy as np
import pytest
import torch
from torch import nn

from coevo.es.host import TorchWeightsHost, compute_in
from coevo.es.noise import noise
from coevo.es.perturbation import Perturbation, Update
from coevo.llm.base import WeightsHost


class TiedHeadNet(nn.Module):
    """Embedding, a linear block, a norm, and an output head tied to the embedding."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(50, 16)
        self.block = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight

    def get_output_embeddings(self) -> nn.Module:
        return self.head


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def assert_bit_identical(module: nn.Module, reference: dict[str, torch.Tensor]) -> None:
    for name, param in module.named_parameters():
        assert torch.equal(param.detach().view(torch.uint8), reference[name].view(torch.uint8)), name


def test_host_satisfies_the_protocol():
    assert isinstance(TorchWeightsHost(TiedHeadNet()), WeightsHost)


def test_scopes_select_the_documented_parameters_and_tied_weights_once():
    net = TiedHeadNet()
    full = ["embed.weight", "block.weight", "block.bias", "norm.weight", "norm.bias"]
    assert TorchWeightsHost(net, "full").parameter_names == full
    assert TorchWeightsHost(net, "all_linear").parameter_names == ["block.weight", "block.bias"]
    assert TorchWeightsHost(net, r"\.bias$").parameter_names == ["block.bias", "norm.bias"]
    with pytest.raises(ValueError, match="selects no"):
        TorchWeightsHost(net, "^nothing$")
    with pytest.raises(ValueError, match="valid regex"):
        TorchWeightsHost(net, "([")


def test_perturbation_is_master_plus_scaled_noise_under_the_canonical_name():
    net = TiedHeadNet()
    before = net.block.weight.detach().clone()
    host = TorchWeightsHost(net)
    with host.perturbed(Perturbation(seed=42, sigma=0.01, sign=-1)):
        expected = before.numpy() + np.float32(-0.01) * noise(42, "block.weight", before.shape)
        assert np.array_equal(net.block.weight.detach().numpy(), expected)
        assert torch.equal(net.head.weight, net.embed.weight)  # the tie survives
    assert torch.equal(net.block.weight, before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exact_mode_is_bit_identical_after_1000_cycles(dtype):
    net = TiedHeadNet().to(dtype)
    reference = snapshot(net)
    host = TorchWeightsHost(net, restore="exact")
    for seed in range(1000):
        host.perturb(Perturbation(seed=seed, sigma=1.5e-3, sign=1 if seed % 2 else -1))
        host.restore()
    assert_bit_identical(net, reference)


def test_exact_mode_on_bf16_writes_the_rounded_fp32_perturbation():
    net = TiedHeadNet().to(torch.bfloat16)
    master = net.block.weight.detach().float().numpy()
    host = TorchWeightsHost(net)
    with host.perturbed(Perturbation(seed=1, sigma=1e-3)):
        expected = torch.from_numpy(master + np.float32(1e-3) * noise(1, "block.weight", master.shape))
        assert torch.equal(net.block.weight, expected.to(torch.bfloat16))


def test_exact_mode_keeps_bf16_updates_too_small_for_bf16():
    """Ten updates each below half a bf16 ulp vanish in bf16 arithmetic but not from the fp32 master."""
    net = TiedHeadNet().to(torch.bfloat16)
    host = TorchWeightsHost(net, scope=r"^norm\.weight$")  # weights at 1.0: bf16 ulp 2**-7
    update = Update(seeds=(5,), coeffs=(1.0,), alpha=1e-3)
    for _ in range(10):
        host.apply_update(update)
    eps = noise(5, "norm.weight", 16)
    master = np.ones(16, np.float32)
    for _ in range(10):
        master = master + np.float32(1e-3) * eps
    assert torch.equal(net.norm.weight, torch.from_numpy(master).to(torch.bfloat16))
    assert not torch.equal(net.norm.weight, torch.ones(16, dtype=torch.bfloat16))


def test_a_bf16_compute_copy_moves_exactly_as_its_fp32_weights():
    """Perturb, restore and update on a `compute_in` bf16 module give the casts of what the same steps give
    the fp32 module, and a host made later (a resume, another run) starts from the fp32 master."""
    fp32, bf16 = TiedHeadNet(), TiedHeadNet()
    compute_in(bf16, torch.bfloat16)
    hosts32, hosts16 = [TorchWeightsHost(fp32)], [TorchWeightsHost(bf16)]

    def assert_bf16_is_the_cast() -> None:
        for (name, p32), p16 in zip(fp32.named_parameters(), bf16.parameters(), strict=True):
            assert p16.dtype == torch.bfloat16
            assert torch.equal(p16.detach(), p32.detach().to(torch.bfloat16)), name

    update = Update(seeds=(1, 2), coeffs=(0.5, -1.0), alpha=1e-4)
    for step in range(3):
        for seed in range(4):
            perturbation = Perturbation(seed=10 * step + seed, sigma=1e-3, sign=1 if seed % 2 else -1)
            with hosts32[-1].perturbed(perturbation), hosts16[-1].perturbed(perturbation):
                assert_bf16_is_the_cast()
            assert_bf16_is_the_cast()
        hosts32[-1].apply_update(update)
        hosts16[-1].apply_update(update)
        assert_bf16_is_the_cast()
        hosts32.append(TorchWeightsHost(fp32))
        hosts16.append(TorchWeightsHost(bf16))
    assert hosts16[-1]._tensors[0].master is not None
    assert np.array_equal(hosts16[-1]._tensors[0].master, fp32.embed.weight.detach().numpy().reshape(-1))


def test_weights_written_behind_the_hosts_back_become_the_master_of_the_next_host():
    net = TiedHeadNet()
    compute_in(net, torch.bfloat16)
    TorchWeightsHost(net).apply_update(Update(seeds=(1,), coeffs=(1.0,), alpha=1e-2))
    with torch.no_grad():
        net.block.weight.fill_(0.5)
    host = TorchWeightsHost(net, scope=r"^block\.weight$")
    with host.perturbed(Perturbation(seed=3, sigma=1e-3)):
        pass
    assert torch.equal(net.block.weight, torch.full((16, 16), 0.5, dtype=torch.bfloat16))


def test_inplace_mode_drift_after_1000_cycles_is_far_below_one_update():
    net = TiedHeadNet()
    reference = snapshot(net)
    host = TorchWeightsHost(net, restore="inplace")
    for seed in range(1000):
        with host.perturbed(Perturbation(seed=seed, sigma=1.5e-3)):
            pass
    drift = torch.cat([(p.detach() - reference[n]).reshape(-1) for n, p in net.named_parameters()])
    one_update_rms = 5e-4  # alpha of the reference with unit-variance noise
    assert drift.pow(2).mean().sqrt().item() < 0.01 * one_update_rms


def test_inplace_mode_refuses_low_precision_weights():
    with pytest.raises(ValueError, match="restore='exact'"):
        TorchWeightsHost(TiedHeadNet().to(torch.bfloat16), restore="inplace")


def test_sgd_update_is_the_same_in_both_modes_and_matches_its_definition():
    update = Update(seeds=(1, 2, 3), coeffs=(0.5, -0.25, 1.0), alpha=0.1)
    results = []
    for mode in ("exact", "inplace"):
        net = TiedHeadNet()
        before = net.block.weight.detach().numpy().copy()
        TorchWeightsHost(net, restore=mode).apply_update(update)
        results.append(net.block.weight.detach().numpy().copy())
    direction = np.zeros_like(before)
    for seed, coeff in zip(update.seeds, update.coeffs, strict=True):
        direction += np.float32(update.alpha * coeff) * noise(seed, "block.weight", before.shape)
    assert np.array_equal(results[0], results[1])
    assert np.array_equal(results[0], before + direction)


def test_misuse_fails_loudly_and_context_manager_restores_on_error():
    net = TiedHeadNet()
    reference = snapshot(net)
    host = TorchWeightsHost(net)
    with pytest.raises(RuntimeError, match="without an active"):
        host.restore()
    host.perturb(Perturbation(seed=1, sigma=0.1))
    with pytest.raises(RuntimeError, match="restore"):
        host.perturb(Perturbation(seed=2, sigma=0.1))
    with pytest.raises(RuntimeError, match="restore"):
        host.apply_update(Update(seeds=(1,), coeffs=(1.0,), alpha=0.1))
    host.restore()
    with pytest.raises(KeyError), host.perturbed(Perturbation(seed=3, sigma=0.1)):
        raise KeyError("evaluation failed")
    assert host.active is None
    assert_bit_identical(net, reference)


def test_sha256_tracks_weights():
    host = TorchWeightsHost(TiedHeadNet())
    base = host.weights_sha256()
    assert TorchWeightsHost(TiedHeadNet()).weights_sha256() == base
    with host.perturbed(Perturbation(seed=1, sigma=1e-6)):
        assert host.weights_sha256() != base
    assert host.weights_sha256() == base
