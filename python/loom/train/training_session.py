from loom.train import (CheckpointConfig, CrossValidationConfig, TestConfig,  # noqa: F401
                        TrainingSession, training_session)
