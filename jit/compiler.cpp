// compile(): generated source → NVRTC (loaded with dlopen) → cubin + ptxas facts.
#include "jit/compiler.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "jit/embedded_templates.hpp"
#include "jit/nvrtc_library.hpp"
#include "base/config.hpp"
#include "base/log.hpp"
#include "base/hash.hpp"

namespace sage2::jit {

using kernels::KernelSpec;
namespace {

// Writes `text` to dir/name; a failure is a warning, never an error (dumping is a debug aid).
void dump_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) base::log::warn_once("dump:" + dir, "SAGE2_DUMP_DIR: cannot write " + path);
}

struct ProgramGuard {
  const nvrtc::Api& a;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) a.destroy_program(&prog);
  }
};

std::string nvrtc_error(const nvrtc::Api& a, nvrtcResult r) {
  const char* s = a.get_error_string ? a.get_error_string(r) : nullptr;
  return s ? s : ("nvrtcResult " + std::to_string(static_cast<int>(r)));
}

// First integer before `suffix` in `line` ("... 40 registers" → 40); -1 when absent.
long long number_before(const std::string& line, const std::string& suffix) {
  const std::size_t at = line.find(suffix);
  if (at == std::string::npos) return -1;
  std::size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return -1;
  return std::strtoll(line.substr(begin, end - begin).c_str(), nullptr, 10);
}

// Adds every "N bytes cmem[k]" of the line.
long long cmem_total(const std::string& line) {
  long long total = 0;
  bool any = false;
  const std::string tag = " bytes cmem[";
  for (std::size_t at = line.find(tag); at != std::string::npos; at = line.find(tag, at + 1)) {
    std::size_t begin = at;
    while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
    if (begin == at) continue;
    total += std::strtoll(line.substr(begin, at - begin).c_str(), nullptr, 10);
    any = true;
  }
  return any ? total : -1;
}

void parse_line(const std::string& line, PtxasFacts& f) {
  long long n;
  if ((n = number_before(line, "registers")) >= 0 && line.find("Used") != std::string::npos)
    f.registers = static_cast<int>(n);
  if ((n = number_before(line, "bytes stack frame")) >= 0) f.stack_frame_bytes = static_cast<int>(n);
  if ((n = number_before(line, "bytes spill stores")) >= 0) f.spill_store_bytes = static_cast<int>(n);
  if ((n = number_before(line, "bytes spill loads")) >= 0) f.spill_load_bytes = static_cast<int>(n);
  if ((n = number_before(line, "bytes smem")) >= 0) f.static_shared_bytes = static_cast<int>(n);
  if ((n = cmem_total(line)) >= 0) f.constant_bytes = static_cast<int>(n);
}

// The quoted name in "... entry function 'name' ..." / "Function properties for name".
std::string section_name(const std::string& line) {
  const std::size_t q1 = line.find('\'');
  if (q1 != std::string::npos) {
    const std::size_t q2 = line.find('\'', q1 + 1);
    if (q2 != std::string::npos) return line.substr(q1 + 1, q2 - q1 - 1);
  }
  const std::string tag = "Function properties for ";
  const std::size_t at = line.find(tag);
  if (at != std::string::npos) {
    std::string n = line.substr(at + tag.size());
    while (!n.empty() && (n.back() == '\r' || n.back() == ' ' || n.back() == ':')) n.pop_back();
    return n;
  }
  return {};
}

}  // namespace

PtxasFacts parse_ptxas_facts(const std::string& log, const std::string& entry) {
  // ptxas -v reports, per function:
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90a'
  //   ptxas info    : Function properties for NAME
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 544 bytes cmem[0]
  // Lines are attributed to the function named by the last "Compiling entry function" /
  // "Function properties for" line; with an empty `entry`, the first entry function counts.
  PtxasFacts f;
  std::istringstream in(log);
  std::string line, current, target = entry;
  bool any_section = false;
  while (std::getline(in, line)) {
    if (line.find("Compiling entry function") != std::string::npos ||
        line.find("Function properties for") != std::string::npos) {
      current = section_name(line);
      if (target.empty() && line.find("Compiling entry function") != std::string::npos) target = current;
      any_section = true;
      continue;
    }
    if (!any_section || current == target) parse_line(line, f);
  }
  return f;
}

PtxasFacts parse_ptxas_facts(const std::string& log) { return parse_ptxas_facts(log, std::string()); }

std::pair<int, int> nvrtc_version() noexcept {
  const nvrtc::Api* a = nvrtc::try_api();
  if (!a) return {0, 0};
  return {a->major, a->minor};
}

std::vector<int> nvrtc_supported_archs() noexcept {
  try {
    const nvrtc::Api* a = nvrtc::try_api();
    if (!a || !a->get_num_supported_archs || !a->get_supported_archs) return {};
    int n = 0;
    if (a->get_num_supported_archs(&n) != NVRTC_SUCCESS || n <= 0 || n > 1024) return {};
    std::vector<int> v(static_cast<std::size_t>(n));
    if (a->get_supported_archs(v.data()) != NVRTC_SUCCESS) return {};
    return v;
  } catch (...) {
    return {};
  }
}

CompiledKernel compile(const KernelSpec& spec) {
  nvrtc::api();  // Error(NvrtcMissing) before any other work
  return compile(make_build(spec));
}

CompiledKernel compile_source(const KernelSpec& spec, const std::string& source) {
  nvrtc::api();
  return compile(make_build(spec, source));
}

CompileTarget compile_target(const KernelSpec& spec) { return CompileTarget{spec.entry_name(), spec.arch, spec.ptx}; }

CompiledKernel compile(const KernelBuild& b) { return compile(b, compile_target(b.spec)); }

CompiledKernel compile(const KernelBuild& b, const CompileTarget& target) {
  const nvrtc::Api& a = nvrtc::api();  // Error(NvrtcMissing) when unusable
  if (b.toolchain.nvrtc_major != a.major || b.toolchain.nvrtc_minor != a.minor)
    throw Error(ErrorCode::Internal, "kernel build " + b.key + " was made for NVRTC " +
                                         std::to_string(b.toolchain.nvrtc_major) + "." +
                                         std::to_string(b.toolchain.nvrtc_minor) + ", but NVRTC " +
                                         std::to_string(a.major) + "." + std::to_string(a.minor) + " is loaded");
  const std::string& source = b.source;
  const std::vector<std::string>& options = b.options;
  CompiledKernel out;
  out.key = b.key;
  out.arch = target.arch;
  out.entry = target.entry;
  out.nvrtc_major = a.major;
  out.nvrtc_minor = a.minor;
  const std::string dump_dir = base::config::process_config().dump_dir;
  const std::string dump_name = base::hex16(base::fnv1a64(out.key.data(), out.key.size()));

  // Every embedded template is offered as a header; NVRTC reads only those #included.
  std::vector<std::string> header_text, header_name;
  for (const auto& t : embedded_templates()) {
    header_name.emplace_back(t.name);
    header_text.emplace_back(t.text);
  }
  std::vector<const char*> hn, ht, opt;
  for (std::size_t i = 0; i < header_name.size(); ++i) {
    hn.push_back(header_name[i].c_str());
    ht.push_back(header_text[i].c_str());
  }
  for (const auto& o : options) opt.push_back(o.c_str());

  const auto t0 = std::chrono::steady_clock::now();
  ProgramGuard g{a};
  const std::string program_name = out.entry + ".cu";
  nvrtcResult r = a.create_program(&g.prog, source.c_str(), program_name.c_str(), static_cast<int>(hn.size()),
                                   ht.data(), hn.data());
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorCode::CompileError, "nvrtcCreateProgram failed for " + out.key + ": " + nvrtc_error(a, r));
  const nvrtcResult cr = a.compile_program(g.prog, static_cast<int>(opt.size()), opt.data());
  std::size_t log_size = 0;
  if (a.get_program_log_size(g.prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    std::string log(log_size, '\0');
    if (a.get_program_log(g.prog, log.data()) == NVRTC_SUCCESS) {
      while (!log.empty() && log.back() == '\0') log.pop_back();
      out.log = std::move(log);
    }
  }
  if (!dump_dir.empty()) {
    dump_file(dump_dir, dump_name + ".cu", source);
    dump_file(dump_dir, dump_name + ".log", "// key: " + out.key + "\n" + out.log);
  }
  if (cr != NVRTC_SUCCESS) {
    std::string opts;
    for (const auto& o : options) opts += " " + o;
    throw Error(ErrorCode::CompileError, "NVRTC " + std::to_string(a.major) + "." + std::to_string(a.minor) +
                                             " failed to compile kernel " + out.key + " (entry " + out.entry +
                                             ", options" + opts + "): " + nvrtc_error(a, cr) +
                                             "\n--- NVRTC log ---\n" + out.log +
                                             (!dump_dir.empty() ? "\n(source dumped to " + dump_dir + "/" + dump_name + ".cu)"
                                                       : std::string()));
  }
  if (target.ptx) {
    // The module is the PTX text, NUL included (cuModuleLoadData JIT-compiles it for the device).
    std::size_t ptx_size = 0;
    r = a.get_ptx_size(g.prog, &ptx_size);
    if (r != NVRTC_SUCCESS || ptx_size <= 1)
      throw Error(ErrorCode::CompileError, "NVRTC produced no PTX for " + out.key + ": " + nvrtc_error(a, r));
    out.cubin.resize(ptx_size);
    r = a.get_ptx(g.prog, out.cubin.data());
    if (r != NVRTC_SUCCESS)
      throw Error(ErrorCode::CompileError, "nvrtcGetPTX failed for " + out.key + ": " + nvrtc_error(a, r));
    out.cubin.back() = '\0';
  } else {
    std::size_t cubin_size = 0;
    r = a.get_cubin_size(g.prog, &cubin_size);
    if (r != NVRTC_SUCCESS || cubin_size == 0)
      throw Error(ErrorCode::CompileError, "NVRTC produced no cubin for " + out.key + ": " + nvrtc_error(a, r));
    out.cubin.resize(cubin_size);
    r = a.get_cubin(g.prog, out.cubin.data());
    if (r != NVRTC_SUCCESS)
      throw Error(ErrorCode::CompileError, "nvrtcGetCUBIN failed for " + out.key + ": " + nvrtc_error(a, r));
  }
  if (!dump_dir.empty()) {
    std::size_t ptx_size = 0;
    if (a.get_ptx_size(g.prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
      std::string ptx(ptx_size, '\0');
      if (a.get_ptx(g.prog, ptx.data()) == NVRTC_SUCCESS) {
        while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
        dump_file(dump_dir, dump_name + ".ptx", ptx);
      }
    }
  }
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.facts = parse_ptxas_facts(out.log, out.entry);
  if (out.facts.spill_store_bytes > 0 || out.facts.spill_load_bytes > 0)
    // debug, not warn: a few bytes of spill are a known ptxas choice on some masked / FP16 specs
    // (docs/gpu-coverage.md), nothing a user can act on; sage2-autotune reads the facts itself.
    base::log::debug("kernel " + out.key + " spills registers (" + std::to_string(out.facts.spill_store_bytes) +
              " bytes stored, " + std::to_string(out.facts.spill_load_bytes) + " loaded)");
  base::log::debug("compiled " + out.key + " in " + std::to_string(out.compile_seconds) + " s, " +
             std::to_string(out.facts.registers) + " registers");
  return out;
}

}  // namespace sage2::jit
