"""Program tasks in OpenEvolve's layout: a folder with ``initial_program.py`` and ``evaluator.py``.

The parts, each in its own module: ``layout`` reads the folder (the EVOLVE block, the fixed text
around it, the optional ``config.yaml``); ``evaluator_check`` refuses an evaluator that needs more
than the program's functions; ``evaluator_module`` loads the evaluator; ``evaluation_result`` is the small
``openevolve.evaluation_result`` evaluators import; ``session`` runs ``evaluate`` in a thread of
the trusted driver process; ``stand_in`` gives it the program as a module whose functions are calls
into the sandbox. The task class itself is ``tasks.program_task.ProgramTask``.
"""
