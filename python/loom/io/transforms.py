"""The transforms of an ImageDeserializer's image stream (CNTK's cntk.io.transforms), applied in the
order given: crop(crop_type, crop_size, side_ratio, area_ratio, aspect_ratio, jitter_type)
(crop_type 'center', 'randomside', 'randomarea' or 'multiview10'; crop_size a number or
(width, height); a ratio or a (min, max) range; jitter_type 'none', 'uniratio', 'unilength' or
'uniarea'), scale(width, height, channels, interpolations, scale_mode, pad_value) (exactly one,
after every crop), mean(filename) (after scale), color(brightness_radius, contrast_radius,
saturation_radius) and intensity(intensity_stdev, intensity_file)."""
from loom._loom.io.transforms import color, crop, intensity, mean, scale  # noqa: F401
