"""Python kernels of the image file ops and the whole-file ops (image_codec.yaml).

A string is a uint8 vector of its bytes (opsdk's runtime has numeric tensors only). Pillow reads
and writes the files; what TensorFlow's decoders do that Pillow's defaults do not is done here, on
the pixels Pillow gives, so that the values are TensorFlow's:

* PNG: channels converted as libpng converts them for TensorFlow: gray from colour is
  (9797 R + 19234 G + 3737 B) >> 15 (Pillow rounds other weights), alpha is dropped, gray is
  repeated into colour, and alpha comes from a tRNS chunk or is opaque; 16-bit samples become 8
  bits by a shift (Pillow clips them) and 8-bit ones 16 bits by * 257.
* JPEG: gray asked of libjpeg itself (the Y of YCbCr, Pillow's draft), `ratio` as libjpeg's DCT
  scaling (draft too), CMYK to RGB by TensorFlow's arithmetic.
* BMP: 8 bits a pixel are one channel of the stored values (TensorFlow's decoder reads no
  palette), and 32 bits keep their fourth byte as alpha (Pillow drops it).
* GIF: every frame of the canvas, transparent pixels 0 where no frame has drawn.

Each file is recognised by its first bytes, as TensorFlow's decoders recognise it, so decode_png
reads a JPEG or a one-frame GIF too and decode_gif a PNG.
"""

from __future__ import annotations

import io
import os
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

# TensorFlow's signatures, in the order it tries them.
_FORMATS = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"GIF8", "GIF"),
            (b"BM", "BMP"))
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}  # colour type -> channels (a palette's: RGB)


class _Refused(ValueError):
    """An input the op refuses, its message already naming the op."""


def _pillow(op: str) -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ModuleNotFoundError(f"{op}: reading and writing image files needs Pillow, which is "
                                  "not installed: pip install pillow (or 'opsdk[image]')") from None
    return Image


def _host(xp: Any, a: Any) -> np.ndarray:
    return getattr(xp, "asnumpy", np.asarray)(a)


def _bytes(xp: Any, a: Any) -> bytes:
    return _host(xp, a).astype(np.uint8, copy=False).tobytes()


def _out(xp: Any, array: np.ndarray) -> Any:
    return xp.asarray(np.ascontiguousarray(array))


@contextmanager
def _pillow_errors(op: str, what: str) -> Iterator[None]:
    """Pillow's errors (and any other of bad bytes) as the op's: '<op>: <what>: <the error>'."""
    try:
        yield
    except (_Refused, MemoryError):
        raise
    except Exception as exc:
        raise ValueError(f"{op}: {what}: {type(exc).__name__}: {exc}") from exc


def _reading(op: str, kind: str, data: bytes) -> Any:
    return _pillow_errors(op, f"invalid {kind} data ({len(data)} bytes)")


def _open(op: str, kind: str, data: bytes) -> Any:
    image = _pillow(op)
    with _reading(op, kind, data):
        return image.open(io.BytesIO(data), formats=[kind])


def _format(op: str, data: bytes) -> str:
    for magic, kind in _FORMATS:
        if data.startswith(magic):
            return kind
    raise _Refused(f"{op}: unknown image file format (the contents begin {data[:8]!r}); one of "
                   "JPEG, PNG, GIF, BMP required")


# ---- channels -----------------------------------------------------------------------------------

def _gray(rgb: np.ndarray) -> np.ndarray:
    """libpng's gray of 8-bit colour with TensorFlow's weights (0.299, 0.587): 15-bit fixed
    point, truncated."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((9797 * r + 19234 * g + 3737 * b) >> 15).astype(rgb.dtype)[..., None]


def _channels(pixels: np.ndarray, channels: int, alpha: Any = None) -> np.ndarray:
    """[h, w, 1 to 4] to `channels` (0: as it is), as TensorFlow converts them: gray repeated,
    alpha dropped or added (`alpha` where the file has one apart, else opaque)."""
    have = pixels.shape[-1]
    if channels in (0, have):
        return pixels
    if have <= 2:
        colour, a = np.repeat(pixels[..., :1], 3, axis=-1), pixels[..., 1:] if have == 2 else None
    else:
        colour, a = pixels[..., :3], pixels[..., 3:] if have == 4 else None
    if channels == 1:
        return pixels[..., :1] if have <= 2 else _gray(colour)
    if channels == 3:
        return colour
    if a is None:
        a = alpha if alpha is not None else np.full(colour.shape[:-1] + (1,),
                                                    np.iinfo(pixels.dtype).max, pixels.dtype)
    return np.concatenate([colour, a.astype(pixels.dtype)], axis=-1)


# ---- the formats ---------------------------------------------------------------------------------

def _png(op: str, data: bytes, channels: int, wide: bool) -> np.ndarray:
    """[h, w, c]: uint16 when `wide`, else uint8."""
    if len(data) < 26 or data[12:16] != b"IHDR" or data[25] not in _PNG_CHANNELS:
        raise ValueError(f"{op}: invalid PNG data ({len(data)} bytes): no valid IHDR chunk")
    depth, colour = data[24], data[25]
    if depth == 16 and colour != 0 and wide:
        raise _Refused(f"{op}: this PNG has 16-bit colour, which Pillow reads at 8 bits only, so "
                       "opsdk decodes it to uint8 only (TensorFlow gives its 16 bits); decode it "
                       "with dtype uint8")
    im = _open(op, "PNG", data)
    key = im.info.get("transparency")
    if depth == 16 and colour == 2 and key is not None and channels == 4:
        raise _Refused(f"{op}: this PNG has 16-bit colour with a transparent colour (tRNS), "
                       "which opsdk cannot apply to the 8 bits Pillow reads; decode it with "
                       "channels 0, 1 or 3")
    alpha = None
    with _reading(op, "PNG", data):
        if colour == 3:  # a palette: its colours, with alpha where tRNS gives some
            pixels = np.asarray(im.convert("RGBA" if key is not None else "RGB"))
        elif colour == 0 and depth == 16:
            pixels = np.asarray(im).astype(np.uint16)[..., None]  # Pillow's I;16, as it is
        else:  # 1, 2, 4 or 8 bits (gray expanded to 8 as libpng does); 16-bit colour at 8
            pixels = np.asarray(im.convert({0: "L", 2: "RGB", 4: "LA", 6: "RGBA"}[colour]))
            if pixels.ndim == 2:
                pixels = pixels[..., None]
    if key is not None and colour in (0, 2):  # a transparent gray or colour: alpha for 4 channels
        top = np.iinfo(pixels.dtype).max
        if colour == 0:
            value = key if depth >= 8 else key * (255 // ((1 << depth) - 1))
            clear = pixels[..., 0] == value
        else:
            clear = np.all(pixels == np.asarray(key, dtype=pixels.dtype), axis=-1)
        alpha = np.where(clear, 0, top).astype(pixels.dtype)[..., None]
    pixels = _channels(pixels, channels, alpha)
    if wide and pixels.dtype == np.uint8:
        return pixels.astype(np.uint16) * np.uint16(257)
    if not wide and pixels.dtype == np.uint16:
        return (pixels >> 8).astype(np.uint8)
    return pixels


def _jpeg(op: str, data: bytes, channels: int, ratio: int) -> np.ndarray:
    if channels not in (0, 1, 3):
        raise _Refused(f"{op}: a JPEG decodes to 1 or 3 channels, not {channels}")
    im = _open(op, "JPEG", data)
    width, height = im.size
    if im.mode == "CMYK" and channels == 1:
        raise _Refused(f"{op}: a CMYK JPEG cannot be decoded to gray (nor can TensorFlow's "
                       "decoder); give channels 0 or 3")
    if ratio > 1 and min(width, height) < ratio:
        raise _Refused(f"{op}: ratio {ratio} needs an image at least {ratio} pixels wide and "
                       f"high; this one is {width}x{height}")
    with _reading(op, "JPEG", data):
        if channels == 1 or ratio > 1:
            # libjpeg's own gray and DCT scaling: the size asked for is the one 1/ratio gives
            im.draft("L" if channels == 1 else None,
                     (width // ratio, height // ratio) if ratio > 1 else None)
        im.load()
        pixels = np.asarray(im)
    if im.mode == "CMYK":
        # TensorFlow's arithmetic on libjpeg's values, which Pillow gives inverted (Adobe's
        # polarity, assumed for every CMYK JPEG)
        cmyk = 255 - pixels.astype(np.int32)
        if "adobe" not in im.info:
            cmyk = 255 - cmyk
        pixels = (cmyk[..., :3] * cmyk[..., 3:] // 255).astype(np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    return _channels(pixels, channels)


def _bmp(op: str, data: bytes, channels: int) -> np.ndarray:
    if channels not in (0, 3, 4):
        raise _Refused(f"{op}: channels must be 0, 3 or 4 for a BMP (as TensorFlow's), got "
                       f"{channels}")
    im = _open(op, "BMP", data)
    header = int.from_bytes(data[14:18], "little")  # the bits a pixel follow its size
    at = 28 if header >= 40 else 24
    bits = int.from_bytes(data[at:at + 2], "little")
    if bits not in (8, 24, 32):
        raise _Refused(f"{op}: this BMP has {bits} bit{'s' * (bits != 1)} a pixel; "
                       "TensorFlow's decoder, and so opsdk's, reads 8, 24 or 32")
    with _reading(op, "BMP", data):
        tile = im.tile[0] if len(im.tile) == 1 else None
        if bits == 24:
            pixels = np.asarray(im.convert("RGB"))
        elif tile is not None and tile[0] == "raw":
            # the stored bytes: 8 bits a value each (no palette), or B, G, R and alpha. A tile
            # is (codec, box, offset, (raw mode, stride, orientation)) in every Pillow.
            offset, (_, stride, orientation) = tile[2], tile[3]
            mode, raw = ("L", "L") if bits == 8 else ("RGBA", "BGRA")
            rows = data[offset:offset + stride * im.size[1]]
            pixels = np.asarray(_pillow(op).frombuffer(mode, im.size, rows, "raw", raw, stride,
                                                       orientation))
        else:  # compressed: as Pillow decodes it (a palette's indices stay indices)
            pixels = np.asarray(im if im.mode in ("P", "L") else im.convert(
                "L" if bits == 8 else "RGBA"))
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    return _channels(pixels, channels)


def _gif(op: str, data: bytes, channels: int, frames: str) -> np.ndarray:
    """[frames, h, w, 3]; `frames`: 'all', 'first', or 'one' (more is an error)."""
    if channels not in (0, 3):
        raise _Refused(f"{op}: channels must be 0 or 3 for a GIF (as TensorFlow's), got "
                       f"{channels}")
    im = _open(op, "GIF", data)
    count = getattr(im, "n_frames", 1)
    if frames == "one" and count > 1:
        raise _Refused(f"{op}: got {count} frames, but animated GIFs can only be decoded by "
                       "decode_gif or decode_image (as TensorFlow's)")
    count = 1 if frames == "first" else count
    with _reading(op, "GIF", data):
        width, height = im.size
        out = np.empty((count, height, width, 3), np.uint8)
        for i in range(count):
            im.seek(i)
            rgba = np.asarray(im.convert("RGBA"))
            out[i] = np.where(rgba[..., 3:] == 0, np.uint8(0), rgba[..., :3])
    return out


def _decode(op: str, xp: Any, contents: Any, channels: int, dtype: Any, frames: str,
            ratio: int = 1, formats: tuple = ("JPEG", "PNG", "GIF", "BMP")) -> Any:
    """`contents` decoded, whatever its format, to `dtype`. `frames`: 'all' (a GIF is
    [frames, h, w, 3], the others get a first dim of 1), 'first' or 'one' ([h, w, c]), or
    'animated' (decode_image: 'all' for a GIF, 'one' otherwise)."""
    data = _bytes(xp, contents)
    kind = _format(op, data)
    _pillow(op)  # a missing Pillow named before the rest
    if kind not in formats:
        use = "decode_bmp" if kind == "BMP" else f"decode_{kind.lower()}"
        raise _Refused(f"{op}: the contents are a {kind} file, which {op} does not decode; use "
                       f"{use} or decode_image (as TensorFlow says)")
    dtype = np.dtype(dtype)
    if kind == "PNG":
        pixels = _png(op, data, channels, wide=dtype != np.uint8)
    elif kind == "JPEG":
        pixels = _jpeg(op, data, channels, ratio)
    elif kind == "BMP":
        pixels = _bmp(op, data, channels)
    else:
        pixels = _gif(op, data, channels, "all" if frames in ("all", "animated") else frames)
        if frames not in ("all", "animated"):
            pixels = pixels[0]
    if frames == "all" and kind != "GIF":
        pixels = _channels(pixels, 3)[None]  # decode_gif: one frame of RGB
    if dtype == np.uint8 or (kind == "PNG" and dtype == np.uint16):
        return _out(xp, pixels)
    if dtype == np.uint16:  # 8 bits widened by a shift, as TensorFlow widens them
        return _out(xp, pixels.astype(np.uint16) << 8)
    top = np.float32(1 / (65535 if kind == "PNG" else 255))
    return _out(xp, pixels.astype(np.float32) * top)


# ---- the ops -------------------------------------------------------------------------------------

def decode_png(xp, contents, channels, dtype):
    return _decode("decode_png", xp, contents, channels, dtype, "one",
                   formats=("JPEG", "PNG", "GIF"))


def decode_jpeg(xp, contents, channels, ratio):
    return _decode("decode_jpeg", xp, contents, channels, np.uint8, "one", ratio,
                   formats=("JPEG", "PNG", "GIF"))


def decode_bmp(xp, contents, channels):
    return _decode("decode_bmp", xp, contents, channels, np.uint8, "one", formats=("BMP",))


def decode_gif(xp, contents):
    return _decode("decode_gif", xp, contents, 0, np.uint8, "all", formats=("JPEG", "PNG", "GIF"))


def decode_image(xp, contents, channels, expand_animations, dtype):
    return _decode("decode_image", xp, contents, channels, dtype,
                   "animated" if expand_animations else "first")


def encode_png(xp, image, compression):
    op = "encode_png"
    Image = _pillow(op)
    pixels = _host(xp, image)
    height, width, depth = pixels.shape
    if depth not in (1, 2, 3, 4):
        raise ValueError(f"{op}: image must have 1, 2, 3 or 4 channels, got {depth}")
    if pixels.dtype == np.uint16 and depth != 1:
        raise ValueError(f"{op}: Pillow writes 16-bit PNGs in gray only, and this uint16 image "
                         f"has {depth} channels (TensorFlow writes 16-bit colour too); give one "
                         "channel, or uint8 values")
    if not height or not width:
        raise ValueError(f"{op}: a PNG has at least one row and column; image has shape "
                         f"{list(pixels.shape)}")
    buffer = io.BytesIO()
    with _pillow_errors(op, "Pillow could not write the PNG"):
        plane = np.ascontiguousarray(pixels[..., 0] if depth == 1 else pixels)
        Image.fromarray(plane).save(buffer, format="PNG", compress_level=compression)
    return _out(xp, np.frombuffer(buffer.getvalue(), np.uint8).copy())


def encode_jpeg(xp, image, format, quality, progressive, optimize_size,  # noqa: A002 - TF's name
                chroma_downsampling, x_density, y_density, xmp_metadata):
    op = "encode_jpeg"
    Image = _pillow(op)
    pixels = _host(xp, image)
    height, width, depth = pixels.shape
    want = {"": (1, 3), "grayscale": (1,), "rgb": (3,)}[format]
    if depth not in want:
        raise ValueError(f"{op}: image must have {' or '.join(map(str, want))} channels for "
                         f"format {format!r}, got {depth}")
    if not height or not width:
        raise ValueError(f"{op}: a JPEG has at least one row and column; image has shape "
                         f"{list(pixels.shape)}")
    options = dict(quality=quality, progressive=progressive, optimize=optimize_size,
                   dpi=(x_density, y_density))
    if depth == 3:  # (gray has one sampling, 1 x 1, as TensorFlow writes it)
        options["subsampling"] = 2 if chroma_downsampling else 0
    if xmp_metadata:
        options["xmp"] = xmp_metadata.encode("utf-8")
    buffer = io.BytesIO()
    with _pillow_errors(op, "Pillow could not write the JPEG"):
        plane = np.ascontiguousarray(pixels[..., 0] if depth == 1 else pixels)
        Image.fromarray(plane).save(buffer, format="JPEG", **options)
    return _out(xp, np.frombuffer(buffer.getvalue(), np.uint8).copy())


def _path(xp: Any, filename: Any) -> str:
    return os.fsdecode(_bytes(xp, filename))


def read_file(xp, filename):
    path = _path(xp, filename)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"read_file: cannot read '{path}': {exc.strerror or exc}") from exc
    return _out(xp, np.frombuffer(data, np.uint8).copy())


def write_file(xp, filename, contents):
    path = _path(xp, filename)
    data = _bytes(xp, contents)
    try:
        folder = os.path.dirname(path)
        if folder:  # TensorFlow makes the folders on the way
            os.makedirs(folder, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise ValueError(f"write_file: cannot write '{path}': {exc.strerror or exc}") from exc
    return xp.asarray(np.int64(len(data)))
