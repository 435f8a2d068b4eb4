"""`coevo tune`: hyperparameter studies over coevo runs with Optuna (search space, study, command)."""
