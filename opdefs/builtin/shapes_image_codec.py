"""Shape functions of the image file ops (image_codec.yaml): a decoded image's height and width
are known only when the file is read; its channels are known when the op asks for them."""

from __future__ import annotations


def _channels(attrs):
    return int(attrs.get("channels", 0)) or None


def decoded(shapes, attrs):
    """[height, width, channels]: channels the attr's, unknown for 0 (the file's own)."""
    return [(None, None, _channels(attrs))]


def decoded_frames(shapes, attrs):
    """[frames, height, width, 3]: decode_gif's."""
    return [(None, None, None, 3)]


def decoded_image(shapes, attrs):
    """decode_image's: of unknown rank when a GIF may give [frames, height, width, 3], else
    [height, width, channels]."""
    if attrs.get("expand_animations", True):
        return [None]
    return [(None, None, _channels(attrs))]


def encoded(shapes, attrs):
    """The file's bytes: a vector of a length known when it is written. The image's channels
    are checked when known: 1 to 4 for a PNG, 1 or 3 for a JPEG (1 for format grayscale, 3 for
    rgb)."""
    image = shapes.get("image")
    depth = image[2] if image is not None and len(image) == 3 else None
    if "format" in attrs:
        allowed = {"": (1, 3), "grayscale": (1,), "rgb": (3,)}.get(attrs["format"], (1, 3))
    else:
        allowed = (1, 2, 3, 4)
    if depth is not None and depth not in allowed:
        channels = " or ".join(map(str, allowed)) + (" channel" if allowed == (1,) else " channels")
        raise ValueError(f"image must have {channels} (its last dim), got shape {list(image)}")
    return [(None,)]


def file_contents(shapes, attrs):
    """read_file's: a vector of the file's length."""
    return [(None,)]
