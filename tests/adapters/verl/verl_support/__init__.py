"""Builders for verl's own inputs (DataProto batches, ppo_loss TensorDicts) in the verl tests."""
