"""Torch: the measurement worker run in fresh processes (`worker`) and the
quantization recipes and their support checks (`recipes`). Imports as its parent
package does."""
