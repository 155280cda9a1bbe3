"""ctypes bindings to ggml's compiled C, as shipped by PyPI `libggml-python` (libggml-base.so).

Shared by make_fixtures.py, inspect_oracle.py and model_hashes.py. Only the symbols the oracles need
are bound. The `struct ggml_type_traits` layout is checked against a known type table at load time,
so a libggml build with a different layout fails loudly instead of producing garbage.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import os

import numpy as np

# The 36 live ggml types: name -> (type id, elements per block, bytes per block).
# Mirrors the format registry in src/formats/mod.rs (ggml.h's type ids and block sizes).
TYPES: dict[str, tuple[int, int, int]] = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
    "Q8_K": (15, 256, 292),
    "IQ2_XXS": (16, 256, 66),
    "IQ2_XS": (17, 256, 74),
    "IQ3_XXS": (18, 256, 98),
    "IQ1_S": (19, 256, 50),
    "IQ4_NL": (20, 32, 18),
    "IQ3_S": (21, 256, 110),
    "IQ2_S": (22, 256, 82),
    "IQ4_XS": (23, 256, 136),
    "I8": (24, 1, 1),
    "I16": (25, 1, 2),
    "I32": (26, 1, 4),
    "I64": (27, 1, 8),
    "F64": (28, 1, 8),
    "IQ1_M": (29, 256, 56),
    "BF16": (30, 1, 2),
    "TQ1_0": (34, 256, 54),
    "TQ2_0": (35, 256, 66),
    "MXFP4": (39, 32, 17),
    "NVFP4": (40, 64, 36),
    "Q1_0": (41, 128, 18),
    "Q2_0": (42, 64, 18),
    "F8_E4M3": (43, 1, 1),
}
NAME_BY_ID = {v[0]: k for k, v in TYPES.items()}
GGML_TYPE_COUNT = 43  # ggml_get_type_traits(t) asserts t < GGML_TYPE_COUNT


class TypeTraits(ctypes.Structure):
    # include/ggml.h of libggml-python 0.20.2.post1:
    #   const char *type_name; int64_t blck_size; int64_t blck_size_interleave; size_t type_size;
    #   bool is_quantized; ggml_to_float_t to_float; ggml_from_float_t from_float_ref;
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


def libggml_dir() -> str:
    spec = importlib.util.find_spec("libggml")
    if spec is None or spec.origin is None:
        raise SystemExit("libggml-python is not installed in this interpreter")
    return os.path.dirname(spec.origin)


def libggml_version() -> str:
    return importlib.metadata.version("libggml-python")


class Ggml:
    """libggml-base.so, with the symbols the oracles use."""

    def __init__(self) -> None:
        self.path = os.path.join(libggml_dir(), "lib64", "libggml-base.so")
        lib = ctypes.CDLL(self.path)
        self.lib = lib
        lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
        lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        lib.dequantize_row_q8_K.restype = None
        lib.dequantize_row_q8_K.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]

        # gguf reader (lives in libggml-base)
        lib.gguf_init_from_file.restype = ctypes.c_void_p
        lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, GgufInitParams]
        lib.gguf_free.restype = None
        lib.gguf_free.argtypes = [ctypes.c_void_p]
        for fn, res in [
            ("gguf_get_version", ctypes.c_uint32),
            ("gguf_get_alignment", ctypes.c_size_t),
            ("gguf_get_data_offset", ctypes.c_size_t),
            ("gguf_get_n_kv", ctypes.c_int64),
            ("gguf_get_n_tensors", ctypes.c_int64),
        ]:
            getattr(lib, fn).restype = res
            getattr(lib, fn).argtypes = [ctypes.c_void_p]
        for fn, res in [
            ("gguf_get_key", ctypes.c_char_p),
            ("gguf_get_kv_type", ctypes.c_int),
            ("gguf_get_tensor_name", ctypes.c_char_p),
            ("gguf_get_tensor_type", ctypes.c_int),
            ("gguf_get_tensor_offset", ctypes.c_size_t),
            ("gguf_get_tensor_size", ctypes.c_size_t),
            ("gguf_get_tensor_ne", ctypes.POINTER(ctypes.c_int64)),
        ]:
            getattr(lib, fn).restype = res
            getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_int64]

        self.traits: dict[int, TypeTraits] = {}
        self._to_float: dict[int, TO_FLOAT] = {}
        for name, (tid, blk, size) in TYPES.items():
            if tid >= GGML_TYPE_COUNT:
                continue  # F8_E4M3 (43) is not an upstream type
            tt = lib.ggml_get_type_traits(tid).contents
            got = (tt.type_name.decode(), tt.blck_size, tt.type_size)
            if got[0].upper() != name or got[1] != blk or got[2] != size or tt.blck_size_interleave != 0:
                raise SystemExit(
                    f"ggml_type_traits layout/table mismatch for {name}: got {got}, "
                    f"interleave {tt.blck_size_interleave}; expected {(name.lower(), blk, size)}"
                )
            self.traits[tid] = tt
            if tt.to_float:
                self._to_float[tid] = TO_FLOAT(tt.to_float)

    def has_to_float(self, tid: int) -> bool:
        return tid in self._to_float

    def can_decode(self, tid: int) -> bool:
        return tid in self._to_float or tid == TYPES["Q8_K"][0]

    def decoder_name(self, tid: int) -> str:
        return "ggml:dequantize_row_q8_K" if tid == TYPES["Q8_K"][0] else "ggml:to_float"

    def decode(self, tid: int, blocks: np.ndarray) -> np.ndarray:
        """Decode whole blocks (uint8 array) with ggml's C code; returns float32 values."""
        _, blk, size = TYPES[NAME_BY_ID[tid]]
        src = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1)
        assert src.size % size == 0
        n = src.size // size * blk
        out = np.empty(n, dtype=np.float32)
        if n == 0:
            return out
        if tid == TYPES["Q8_K"][0]:
            self.lib.dequantize_row_q8_K(src.ctypes.data, out.ctypes.data, n)
        else:
            self._to_float[tid](src.ctypes.data, out.ctypes.data, n)
        return out

    # ------------------------------------------------------------------------------------------
    # Quantisers (ggml.h: ggml_quantize_*; ggml-quants.h: quantize_row_*_ref). Bound on first use,
    # so the decode-only oracles never touch these symbols.

    def _quant_lib(self) -> ctypes.CDLL:
        lib = self.lib
        if not getattr(self, "_quant_bound", False):
            lib.ggml_quantize_init.restype = None
            lib.ggml_quantize_init.argtypes = [ctypes.c_int]
            lib.ggml_quantize_free.restype = None
            lib.ggml_quantize_free.argtypes = []
            lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
            lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
            lib.ggml_quantize_chunk.restype = ctypes.c_size_t
            lib.ggml_quantize_chunk.argtypes = [
                ctypes.c_int,  # enum ggml_type type
                ctypes.c_void_p,  # const float * src
                ctypes.c_void_p,  # void * dst
                ctypes.c_int64,  # int64_t start
                ctypes.c_int64,  # int64_t nrows
                ctypes.c_int64,  # int64_t n_per_row
                ctypes.c_void_p,  # const float * imatrix (may be NULL)
            ]
            for fn in ("quantize_row_q8_K_ref", "quantize_row_q8_1_ref"):
                getattr(lib, fn).restype = None
                getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            self._quant_bound = True
        return lib

    def quantize_init(self, tid: int) -> None:
        """ggml_quantize_init: builds the i-quant grids/tables (idempotent, thread-safe)."""
        self._quant_lib().ggml_quantize_init(tid)

    def quantize_free(self) -> None:
        self._quant_lib().ggml_quantize_free()

    def quantize_requires_imatrix(self, tid: int) -> bool:
        return bool(self._quant_lib().ggml_quantize_requires_imatrix(tid))

    def quantize_chunk(self, tid: int, src: np.ndarray, n_per_row: int, imatrix: np.ndarray | None = None) -> np.ndarray:
        """ggml_quantize_chunk over all rows of `src` (f32, n_rows x n_per_row); returns the blocks (uint8).

        ggml aborts the process (GGML_ABORT) for a type its switch lacks (Q8_1, Q8_K); use
        quantize_row_ref for those.
        """
        lib = self._quant_lib()
        _, blk, size = TYPES[NAME_BY_ID[tid]]
        x = np.ascontiguousarray(src, dtype=np.float32).reshape(-1)
        if n_per_row <= 0 or x.size % n_per_row or n_per_row % blk:
            raise ValueError(f"{NAME_BY_ID[tid]}: {x.size} values in rows of {n_per_row} (block {blk})")
        nrows = x.size // n_per_row
        out = np.zeros(nrows * (n_per_row // blk) * size, dtype=np.uint8)
        im = None
        if imatrix is not None:
            im = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
            if im.size != n_per_row:
                raise ValueError(f"imatrix has {im.size} values, want n_per_row = {n_per_row}")
        elif self.quantize_requires_imatrix(tid):
            raise ValueError(f"{NAME_BY_ID[tid]} requires an importance matrix")
        n = lib.ggml_quantize_chunk(
            tid, x.ctypes.data, out.ctypes.data, 0, nrows, n_per_row, None if im is None else im.ctypes.data
        )
        if n != out.size:
            raise SystemExit(f"ggml_quantize_chunk({NAME_BY_ID[tid]}) wrote {n} bytes, want {out.size}")
        return out

    def quantize_row_ref(self, tid: int, src: np.ndarray) -> np.ndarray:
        """quantize_row_q8_K_ref / quantize_row_q8_1_ref (the two quantisers outside ggml_quantize_chunk)."""
        lib = self._quant_lib()
        name = NAME_BY_ID[tid]
        fn = {"Q8_K": lib.quantize_row_q8_K_ref, "Q8_1": lib.quantize_row_q8_1_ref}.get(name)
        if fn is None:
            raise ValueError(f"no reference row quantiser bound for {name}")
        _, blk, size = TYPES[name]
        x = np.ascontiguousarray(src, dtype=np.float32).reshape(-1)
        if x.size % blk:
            raise ValueError(f"{name}: {x.size} values is not a whole number of {blk}-value blocks")
        out = np.zeros(x.size // blk * size, dtype=np.uint8)
        fn(x.ctypes.data, out.ctypes.data, x.size)
        return out
