"""The transforms of an ImageDeserializer's image stream (CNTK's cntk.io.transforms), applied in
the order given: crop(crop_type, side_ratio, area_ratio, aspect_ratio, jitter_type) (a ratio or a
(min, max) range), scale(width, height, channels, interpolations, scale_mode, pad_value) (exactly
one, after every crop), mean(filename) (after scale) and color(brightness_radius,
contrast_radius, saturation_radius)."""
from loom._loom import transforms as _transforms

crop = _transforms.crop
scale = _transforms.scale
mean = _transforms.mean
color = _transforms.color
