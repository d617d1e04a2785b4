"""The C++ driver that runs a manifest's MSL kernels on the CPU (test-only).

`driver_source(manifest, directory, sanitize)` writes one translation unit:
`tests/msl/metal_stdlib`, then each `.metal` file of the manifest in its own
namespace, then per kernel a launcher and a `main` that loads the buffers,
launches the kernels in order and writes the buffers back. How arguments are
passed: the kernel's signature is read from the source text (`kernel void
NAME(...)`); each `[[buffer(n)]]` parameter gets the buffer the manifest binds
at `n` (or the uniform block), cast to the parameter's own type, and each
thread-position attribute gets the thread's ids in the parameter's type.
See `harness.msl_runner` for how the driver is built and run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.runtime import manifest as mf

__all__ = ["MslBuildError", "driver_source", "grouped_threads", "uses_group_memory"]

_ID_ATTRIBUTES = {
    "thread_position_in_grid": "mimir_gid",
    "threadgroup_position_in_grid": "mimir_tgid",
    "thread_position_in_threadgroup": "mimir_lid",
    "threads_per_threadgroup": "mimir_tsize",
    "threadgroups_per_grid": "mimir_groups",
    "threads_per_grid": "mimir_gsize",
    "thread_index_in_threadgroup": "mimir_lindex",
}

_ADDRESS_SPACES = re.compile(r"\b(device|thread|threadgroup)\b")
_KERNEL = re.compile(r"\bkernel\s+void\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\[\[\s*([A-Za-z_]\w*)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]")
# `threadgroup` qualifying a pointer or reference is only an address space:
# `threadgroup float* p`, `threadgroup Foo& r` (not `threadgroup float t[64]`).
_TG_POINTER = re.compile(r"\bthreadgroup\b(?=\s+[\w:<>, ]+?\s*[*&])")


class MslBuildError(RuntimeError):
    """The kernel cannot be built: clang's diagnostics, or a signature the manifest contradicts."""


@dataclass(frozen=True)
class _Param:
    type: str
    name: str
    attribute: str
    index: int | None


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts]


def _signature(source: str, entry: str) -> list[_Param]:
    """The parameters of `kernel void ENTRY(...)`, in declaration order."""
    for m in _KERNEL.finditer(source):
        if m.group(1) != entry:
            continue
        depth, i = 1, m.end()
        while depth:
            if i >= len(source):
                raise MslBuildError(f"unbalanced parentheses in the signature of `{entry}`")
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        params = []
        for text in _split_params(source[m.end() : i - 1]):
            attr = _ATTRIBUTE.search(text)
            if attr is None:
                raise MslBuildError(f"parameter `{text}` of `{entry}` has no attribute")
            decl = _ATTRIBUTE.sub("", text).strip()
            name = re.search(r"([A-Za-z_]\w*)\s*$", decl)
            if name is None:
                raise MslBuildError(f"cannot read the parameter `{text}` of `{entry}`")
            index = int(attr.group(2)) if attr.group(2) is not None else None
            params.append(_Param(decl[: name.start()].strip(), name.group(1), attr.group(1), index))
        return params
    raise MslBuildError(f"no `kernel void {entry}(...)` in the MSL source")


def _cxx_type(msl_type: str) -> str:
    """A parameter's MSL type as C++ outside the kernel source (no address spaces)."""
    text = _ADDRESS_SPACES.sub("", re.sub(r"\bcoherent\s*\(\s*\w+\s*\)", "", msl_type))
    text = re.sub(r"\bconstant\b", "const", text)
    text = re.sub(r"\bconst\b(\s+const\b)+", "const", text)
    return " ".join(text.split())


def _id_value(param: _Param) -> str:
    var = _ID_ATTRIBUTES[param.attribute]
    base = re.sub(r"\bconst\b", "", param.type).strip()
    if param.attribute == "thread_index_in_threadgroup":
        if base not in ("uint", "ushort", "unsigned int", "unsigned short"):
            raise MslBuildError(f"`{param.name}`: thread_index_in_threadgroup must be uint")
        return f"({base}){var}"
    conversions = {
        "uint": f"{var}.x",
        "uint2": f"{var}.xy",
        "uint3": var,
        "ushort": f"(ushort){var}.x",
        "ushort2": f"__builtin_convertvector({var}.xy, ushort2)",
        "ushort3": f"__builtin_convertvector({var}, ushort3)",
    }
    if base not in conversions:
        raise MslBuildError(f"`{param.name}` [[{param.attribute}]] has unsupported type `{base}`")
    return conversions[base]


def _arguments(
    params: list[_Param], kernel: Mapping[str, Any], buffer_index: Mapping[str, int]
) -> list[str]:
    by_slot: dict[int, str] = {}
    access: dict[int, tuple[str, str]] = {}
    for binding in kernel["bindings"]:
        if binding["buffer"] not in buffer_index:
            raise MslBuildError(
                f"`{kernel['entry_point']}` binds unknown buffer `{binding['buffer']}`"
            )
        by_slot[binding["binding"]] = f"mimir_buffers[{buffer_index[binding['buffer']]}]"
        access[binding["binding"]] = (binding["buffer"], binding["access"])
    ub = kernel.get("uniform_binding")
    if ub is not None:
        by_slot[ub["binding"]] = "mimir_uniform"
    args = []
    for p in params:
        if p.attribute == "buffer":
            assert p.index is not None
            if p.index not in by_slot:
                raise MslBuildError(
                    f"`{kernel['entry_point']}` reads [[buffer({p.index})]] (`{p.name}`) "
                    "but the manifest binds nothing there"
                )
            ctype = _cxx_type(p.type)
            if p.index in access:
                _check_access(kernel["entry_point"], p, ctype, *access[p.index])
            if ctype.endswith("&"):
                args.append(f"*({ctype[:-1].strip()}*)({by_slot[p.index]})")
            elif ctype.endswith("*"):
                args.append(f"({ctype})({by_slot[p.index]})")
            else:
                args.append(f"*({ctype}*)({by_slot[p.index]})")
        elif p.attribute in _ID_ATTRIBUTES:
            args.append(_id_value(p))
        else:
            raise MslBuildError(
                f"`{kernel['entry_point']}`: parameter attribute [[{p.attribute}]] is not "
                "supported by the MSL emulation"
            )
    slots = {p.index for p in params if p.attribute == "buffer"}
    unused = sorted(set(by_slot) - slots)
    if unused:
        raise MslBuildError(
            f"the manifest binds buffer indices {unused} that `{kernel['entry_point']}` "
            "does not declare"
        )
    return args


def _check_access(entry: str, param: _Param, ctype: str, buffer: str, access: str) -> None:
    """The manifest's access must be the parameter's: `read` exactly when it is const.

    (WebGPU enforces the same on WGSL bindings, so one manifest lie fails on both.)
    """
    pointee = ctype.rstrip("*& ")
    const = bool(re.search(r"\bconst\b", pointee))
    if const != (access == "read"):
        declared = "read-only" if const else "writable"
        raise MslBuildError(
            f"`{entry}` declares `{param.name}` [[buffer({param.index})]] {declared} "
            f"(`{param.type}`) but the manifest binds `{buffer}` with access `{access}`"
        )


def uses_group_memory(source: str) -> bool:
    return bool(re.search(r"\bthreadgroup\b|\bthreadgroup_barrier\b", source)) or uses_simd(source)


def uses_simd(source: str) -> bool:
    """Whether the kernel calls a simdgroup function (`simd_sum`...) or uses simdgroup
    matrices or barriers (`simdgroup_load`...): its threads then run grouped too."""
    return bool(re.search(r"\bsimd(?:group)?_\w+\s*\(", source))


_LAUNCH = """
static void mimir_launch_{k}(uint mimir_gx, uint mimir_gy, uint mimir_gz) {{
  const uint mimir_tx = {tx}, mimir_ty = {ty}, mimir_tz = {tz};
  const uint mimir_threads = mimir_tx * mimir_ty * mimir_tz;
  const unsigned long mimir_ngroups = (unsigned long)mimir_gx * mimir_gy * mimir_gz;
  if (mimir_ngroups == 0) return;
  const uint3 mimir_tsize = {{mimir_tx, mimir_ty, mimir_tz}};
  const uint3 mimir_groups = {{mimir_gx, mimir_gy, mimir_gz}};
  const uint3 mimir_gsize = mimir_tsize * mimir_groups;
  auto mimir_body = [&](unsigned long mimir_g, uint mimir_l) {{
    const uint mimir_lindex = mimir_l;
    const uint3 mimir_lid = {{mimir_l % mimir_tx, (mimir_l / mimir_tx) % mimir_ty,
                              mimir_l / (mimir_tx * mimir_ty)}};
    const uint3 mimir_tgid = {{uint(mimir_g % mimir_gx), uint((mimir_g / mimir_gx) % mimir_gy),
                               uint(mimir_g / ((unsigned long)mimir_gx * mimir_gy))}};
    const uint3 mimir_gid = mimir_tgid * mimir_tsize + mimir_lid;
    (void)mimir_lindex; (void)mimir_gid; (void)mimir_groups; (void)mimir_gsize;
    {entry}({args});
  }};
  std::vector<std::thread> mimir_pool;
  if ({grouped}) {{
    // One OS thread per GPU thread; a process runs its groups one after another,
    // so the kernel's static (`threadgroup`) arrays are the current group's
    // threadgroup memory. Several processes (fork; buffers are shared memory)
    // take every `step`-th group, so groups run in parallel without sharing it.
    auto mimir_run_groups = [&](unsigned long mimir_first, unsigned long mimir_step) {{
      mimir_rt::group_barrier& mimir_bar = mimir_rt::current_barrier();
      mimir_bar.participants = mimir_threads;
      const uint mimir_width = mimir_rt::simd_width;
      for (uint mimir_s = 0; {simd} && mimir_s * mimir_width < mimir_threads; ++mimir_s) {{
        uint mimir_left = mimir_threads - mimir_s * mimir_width;
        mimir_rt::simdgroups()[mimir_s].barrier.participants =
            mimir_left < mimir_width ? mimir_left : mimir_width;
      }}
      for (uint mimir_l = 0; mimir_l < mimir_threads; ++mimir_l) {{
        mimir_pool.emplace_back([&, mimir_l] {{
          mimir_rt::thread_index() = mimir_l;
          for (unsigned long mimir_g = mimir_first; mimir_g < mimir_ngroups;
               mimir_g += mimir_step) {{
            mimir_body(mimir_g, mimir_l);
            // a thread ends: one that ends while its simdgroup waits is reported
            if ({simd}) mimir_rt::simdgroups()[mimir_l / mimir_width].barrier.arrive_and_wait(1);
            mimir_bar.arrive_and_wait(1);
          }}
        }});
      }}
      for (auto& mimir_t : mimir_pool) mimir_t.join();
      mimir_pool.clear();
    }};
    unsigned long mimir_procs = mimir_processes < mimir_ngroups ? mimir_processes : mimir_ngroups;
    if (mimir_procs <= 1) {{
      mimir_run_groups(0, 1);
    }} else {{
      std::fflush(nullptr);
      std::vector<pid_t> mimir_kids;
      for (unsigned long mimir_w = 0; mimir_w < mimir_procs; ++mimir_w) {{
        pid_t mimir_pid = fork();
        if (mimir_pid < 0) {{ std::perror("mimir-msl: fork"); std::exit(2); }}
        if (mimir_pid == 0) {{
          mimir_run_groups(mimir_w, mimir_procs);
          std::fflush(nullptr);
          std::_Exit(0);
        }}
        mimir_kids.push_back(mimir_pid);
      }}
      int mimir_failed = 0;
      for (pid_t mimir_pid : mimir_kids) {{
        int mimir_status = 0;
        waitpid(mimir_pid, &mimir_status, 0);
        if (!WIFEXITED(mimir_status)) mimir_failed = 5;
        else if (WEXITSTATUS(mimir_status) != 0) mimir_failed = WEXITSTATUS(mimir_status);
      }}
      if (mimir_failed) std::exit(mimir_failed);
    }}
  }} else {{
    const unsigned long mimir_total = mimir_ngroups * mimir_threads;
    for (uint mimir_w = 0; mimir_w < mimir_workers; ++mimir_w) {{
      mimir_pool.emplace_back([&, mimir_w] {{
        for (unsigned long mimir_i = mimir_w; mimir_i < mimir_total; mimir_i += mimir_workers)
          mimir_body(mimir_i / mimir_threads, uint(mimir_i % mimir_threads));
      }});
    }}
    for (auto& mimir_t : mimir_pool) mimir_t.join();  // before mimir_total goes out of scope
  }}
}}
"""

_MAIN = r"""
static const char* mimir_names[] = {@NAMES@};
static const int mimir_nbuffers = @NBUF@;

static std::vector<unsigned char> mimir_read(const std::string& path) {
  std::vector<unsigned char> data;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) { std::fprintf(stderr, "mimir-msl: cannot open %s\n", path.c_str()); std::exit(2); }
  unsigned char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) data.insert(data.end(), chunk, chunk + n);
  std::fclose(f);
  return data;
}

static void mimir_check_guards(const char* kernel) {
#if !MIMIR_SANITIZE_ADDRESS
  for (int b = 0; b < mimir_nbuffers; ++b) {
    for (size_t i = 0; i < MIMIR_GUARD; ++i) {
      if (mimir_blocks[b][i] != 0xA5 ||
          mimir_blocks[b][MIMIR_GUARD + mimir_padded[b] + i] != 0xA5) {
        std::fprintf(stderr, "mimir-msl: kernel `%s` wrote out of bounds of buffer `%s`\n",
                     kernel, mimir_names[b]);
        std::exit(4);
      }
    }
    for (size_t i = mimir_sizes[b]; i < mimir_padded[b]; ++i) {
      if (mimir_buffers[b][i] != 0) {
        std::fprintf(stderr, "mimir-msl: kernel `%s` wrote past the end of buffer `%s`\n",
                     kernel, mimir_names[b]);
        std::exit(4);
      }
    }
  }
#endif
}

int main(int argc, char** argv) {
  if (argc != 2) { std::fprintf(stderr, "usage: driver WORKDIR\n"); return 2; }
  const std::string dir = argv[1];
  unsigned hc = std::thread::hardware_concurrency();
  mimir_workers = hc ? (hc < 8 ? hc : 8) : 2;
  // Sanitizers watch one process; without them, groups are spread over processes.
  mimir_processes = MIMIR_SANITIZE ? 1 : mimir_workers;
  if (const char* mimir_env = std::getenv("MIMIR_MSL_PROCESSES")) {
    mimir_processes = std::atoi(mimir_env) > 0 ? std::atoi(mimir_env) : 1;
  }
  for (int b = 0; b < mimir_nbuffers; ++b) {
    std::vector<unsigned char> data = mimir_read(dir + "/b" + std::to_string(b) + ".bin");
    mimir_sizes[b] = data.size();
    mimir_padded[b] = (data.size() + 63) / 64 * 64;
    if (mimir_padded[b] == 0) mimir_padded[b] = 64;
#if MIMIR_SANITIZE_ADDRESS
    // Exact sizes, so AddressSanitizer sees any access past the end.
    mimir_blocks[b] = new unsigned char[data.size() ? data.size() : 1];
    mimir_buffers[b] = mimir_blocks[b];
#else
    // Shared memory, so that groups run in forked processes write the same buffers.
    mimir_blocks[b] = (unsigned char*)mmap(nullptr, mimir_padded[b] + 2 * MIMIR_GUARD,
                                           PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                           -1, 0);
    if (mimir_blocks[b] == MAP_FAILED) { std::perror("mimir-msl: mmap"); return 2; }
    std::memset(mimir_blocks[b], 0xA5, mimir_padded[b] + 2 * MIMIR_GUARD);
    mimir_buffers[b] = mimir_blocks[b] + MIMIR_GUARD;
    std::memset(mimir_buffers[b], 0, mimir_padded[b]);
#endif
    if (!data.empty()) std::memcpy(mimir_buffers[b], data.data(), data.size());
  }
  std::vector<unsigned char> uniform = mimir_read(dir + "/uniform.bin");
  uniform.resize(uniform.size() + 16);
  mimir_uniform = uniform.data();
  FILE* counts = std::fopen((dir + "/launch.txt").c_str(), "r");
  if (!counts) { std::fprintf(stderr, "mimir-msl: no launch.txt\n"); return 2; }
  unsigned gx, gy, gz;
@LAUNCHES@
  std::fclose(counts);
  for (int b = 0; b < mimir_nbuffers; ++b) {
    FILE* f = std::fopen((dir + "/b" + std::to_string(b) + ".bin").c_str(), "wb");
    std::fwrite(mimir_buffers[b], 1, mimir_sizes[b], f);
    std::fclose(f);
  }
  return 0;
}
"""

_ONE_LAUNCH = """\
  if (std::fscanf(counts, "%u %u %u", &gx, &gy, &gz) != 3) {{
    std::fprintf(stderr, "mimir-msl: bad launch.txt\\n");
    return 2;
  }}
  {ns}::mimir_launch_{k}(gx, gy, gz);
  mimir_check_guards("{entry}");
"""


def driver_source(manifest: Mapping[str, Any], directory: Path, sanitize: str | None) -> str:
    buffers = [b["name"] for b in manifest["buffers"]]
    buffer_index = {name: i for i, name in enumerate(buffers)}
    files: dict[str, int] = {}
    texts: dict[str, str] = {}
    for kernel in manifest["kernels"]:
        if kernel["file"] not in files:
            files[kernel["file"]] = len(files)
            texts[kernel["file"]] = (directory / kernel["file"]).read_text()
    nbuf = max(len(buffers), 1)
    parts = [
        "#include <metal_stdlib>",
        f"#define MIMIR_SANITIZE_ADDRESS {1 if sanitize == 'address' else 0}",
        f"#define MIMIR_SANITIZE {1 if sanitize else 0}",
        "#include <sys/mman.h>",
        "#include <sys/wait.h>",
        "#include <unistd.h>",
        "#define MIMIR_GUARD 4096",
        f"static unsigned char* mimir_buffers[{nbuf}];",
        f"static unsigned char* mimir_blocks[{nbuf}];",
        f"static size_t mimir_sizes[{nbuf}];",
        f"static size_t mimir_padded[{nbuf}];",
        "static unsigned char* mimir_uniform;",
        "static unsigned mimir_workers = 2;",
        "static unsigned mimir_processes = 1;",
    ]
    for file, i in files.items():
        source = _TG_POINTER.sub("", texts[file])
        parts += [f"namespace mimir_f{i} {{", "MIMIR_METAL_NAMES", f'#line 1 "{file}"', source]
        parts += ["}", ""]
    parts += [
        "#undef kernel",
        "#undef device",
        "#undef thread",
        "#undef constant",
        "#undef coherent",
    ]
    parts += ["#undef threadgroup"]
    lines = sum(part.count("\n") + 1 for part in parts)
    parts += [f'#line {lines + 2} "driver.cpp"']
    launches = []
    for k, kernel in enumerate(manifest["kernels"]):
        text = texts[kernel["file"]]
        params = _signature(text, kernel["entry_point"])
        args = _arguments(params, kernel, buffer_index)
        tx, ty, tz = (int(v) for v in kernel["workgroup_size"])
        ns = f"mimir_f{files[kernel['file']]}"
        body = _LAUNCH.format(
            k=k,
            tx=tx,
            ty=ty,
            tz=tz,
            entry=kernel["entry_point"],
            args=", ".join(args),
            grouped="true" if uses_group_memory(text) else "false",
            simd="true" if uses_simd(text) else "false",
        )
        parts += [f"namespace {ns} {{", body, "}"]
        launches.append(_ONE_LAUNCH.format(ns=ns, k=k, entry=kernel["entry_point"]))
    names = ", ".join(f'"{n}"' for n in buffers) or '""'
    main = _MAIN.replace("@NAMES@", names).replace("@NBUF@", str(len(buffers)))
    parts.append(main.replace("@LAUNCHES@", "".join(launches)))
    return "\n".join(parts) + "\n"


def grouped_threads(manifest: Mapping[str, Any], directory: Path, dims: Mapping[str, int]) -> int:
    """How many GPU threads run as OS threads with barriers (the emulation's cost driver).

    Kernels with threadgroup memory, barriers or simdgroup functions run one OS thread per GPU
    thread, and every barrier wakes each of them (a few microseconds apiece);
    other kernels run on a few workers and are cheap.
    """
    total = 0
    for kernel in manifest["kernels"]:
        if uses_group_memory((Path(directory) / kernel["file"]).read_text()):
            groups = math.prod(mf.workgroup_counts(kernel, dims))
            total += groups * math.prod(int(v) for v in kernel["workgroup_size"])
    return total
