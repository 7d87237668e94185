"""Named x86-64 CPUs (`llvm -mcpu=skylake-avx512`, `core-avx2`, `znver3`, ...) as the feature
sets a build for them may use. llvmlite can list only the host's features, so this table
says what each CPU has (each row adds to its parent, following LLVM's X86 CPU definitions).
A build for a named CPU enables exactly these and disables every other feature LLVM knows,
so the features recorded in an export are all the code can use, and the load-time check
(runtime.target.missing_features) is complete.

Only instruction-set features compiled arithmetic can use are listed: system features of the
same CPUs (pku, clwb, rdrnd, shstk, amx tiles, ...) are left out, and so disabled, because
kernels never need them and virtual machines often hide them, which would refuse the CPU."""
from __future__ import annotations

_BASE = ("64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2")
_V2 = ("cx16", "sahf", "popcnt", "crc32", "sse3", "ssse3", "sse4.1", "sse4.2")
_V3 = ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_AVX512 = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

# name: (parent or None, features added to the parent's)
_CPUS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "nehalem": (None, _BASE + _V2),
    "westmere": ("nehalem", ("aes", "pclmul")),
    "sandybridge": ("westmere", ("avx",)),
    "ivybridge": ("sandybridge", ("f16c",)),
    "haswell": ("ivybridge", _V3),
    "broadwell": ("haswell", ("adx", "prfchw")),
    "skylake": ("broadwell", ()),
    "skylake-avx512": ("skylake", _AVX512),
    "cascadelake": ("skylake-avx512", ("avx512vnni",)),
    "cooperlake": ("cascadelake", ("avx512bf16",)),
    "cannonlake": ("skylake-avx512", ("avx512ifma", "avx512vbmi", "sha")),
    "icelake-client": ("cannonlake", ("avx512bitalg", "avx512vbmi2", "avx512vnni",
                                      "avx512vpopcntdq", "gfni", "vaes", "vpclmulqdq")),
    "icelake-server": ("icelake-client", ()),
    "tigerlake": ("icelake-client", ()),
    "sapphirerapids": ("icelake-server", ("avx512bf16", "avx512fp16", "avxvnni")),
    "alderlake": ("skylake", ("avxvnni", "gfni", "sha", "vaes", "vpclmulqdq")),
    "znver1": (None, _BASE + _V2 + _V3 + ("adx", "aes", "pclmul", "prfchw", "sha", "sse4a")),
    "znver2": ("znver1", ()),
    "znver3": ("znver2", ("vaes", "vpclmulqdq")),
    "znver4": ("znver3", _AVX512 + ("avx512bf16", "avx512bitalg", "avx512ifma", "avx512vbmi",
                                    "avx512vbmi2", "avx512vnni", "avx512vpopcntdq", "gfni")),
}
# LLVM's other names for the same CPUs (GCC's spellings, which TVM users also write).
_ALIASES = {"corei7": "nehalem", "corei7-avx": "sandybridge", "core-avx-i": "ivybridge",
            "core-avx2": "haswell", "skx": "skylake-avx512", "icelake": "icelake-client"}


def canonical_cpu(name: str) -> str | None:
    """The table's name for `name` (an alias resolved), None if the table lacks it."""
    name = _ALIASES.get(name, name)
    return name if name in _CPUS else None


def named_cpu_features(name: str) -> list[str]:
    """Every feature the named CPU has, sorted (KeyError for a name not in the table)."""
    name = canonical_cpu(name) or name
    features: set[str] = set()
    while name is not None:
        parent, added = _CPUS[name]
        features.update(added)
        name = parent
    return sorted(features)


def named_cpus() -> list[str]:
    """The CPU names the table knows, aliases included, sorted."""
    return sorted([*_CPUS, *_ALIASES])
