#!/bin/sh
# What each part of a deployable costs: the sizes of its functions and data (nm -S on the unstripped program), grouped
# into parts by the names they have, the unwind tables and the rest of the file (ELF and program headers, dynamic
# symbols, PLT, relocations, alignment) from its section headers. By name and not by object file: a deployable linked
# with LTO (EPSTACK_DEPLOY_LTO) has code of every file in one object, and code inlined into a caller counts as the
# caller's. libstdc++, libm, libc and libgcc_s are linked dynamically and not counted.
# Usage: scripts/deploy_sizes.sh BINARY [BINARY ...]
set -eu
for bin in "$@"; do
  [ -f "$bin" ] || { echo "deploy_sizes: no program $bin" >&2; exit 1; }
  stripped=$(mktemp)
  strip -o "$stripped" "$bin"
  total=$(stat -c %s "$stripped")
  unwind=$(readelf -SW "$stripped" | awk '
    function hex(s,   v, i) { s = tolower(s); v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
    { for (i = 1; i < NF; i++) if ($i ~ /^\.(eh_frame|eh_frame_hdr|gcc_except_table)$/) s += hex($(i + 4)) }
    END { print s + 0 }')
  rm -f "$stripped"
  echo "$(basename "$bin"): $total bytes stripped"
  nm -C -S --size-sort "$bin" | awk -v total="$total" -v unwind="$unwind" '
    function hex(s,   v, i) { s = tolower(s); v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
    # Symbols of the file (not .bss: it takes no space there), each address once (a constructor and its alias).
    NF >= 4 && $3 !~ /^[bB]$/ && !seen[$1]++ {
      size = hex($2); name = $0; sub(/^[0-9a-f]+ [0-9a-f]+ [A-Za-z] /, "", name)
      part = "other epstack code (tensors, statuses, messages)"
      if (name ~ /deploy_example|epstack::bench::|^main$/) part = "the program (main, its inputs, stdio)"
      else if (name ~ /nchwc|dense_tile|dense_segment|depthwise|pointwise|reorder|winograd|epstack::cpu::.*conv/) part = "kernels: blocked-layout convolutions, pools and reorders (nchwc*.cpp)"
      else if (name ~ /dot_block|dot_rows|combine_rows|small_sgemm|cpu::impl::.*gather/) part = "kernels: matrix-vector products (sgemv.cpp)"
      else if (name ~ /sgemm|pack_[ab]|gemm_prepacked/) part = "kernels: packed sgemm (sgemm.cpp)"
      else if (name ~ /gemm_run|gemm_mv|few_rows_product|for_column_pieces|gemm_parallel|matmul/) part = "kernels: the products (matmul.cpp)"
      else if (name ~ /unary_fn|relu|binary_apply|broadcast|parallel_elements/) part = "kernels: element-wise (elementwise.cpp)"
      else if (name ~ /epstack::cpu::ops::|epstack::cpu::impl::/) part = "kernels: other"
      else if (name ~ /epstack::cpu::|basic_cpu_provider/) part = "CPU provider: kernel lookup, parallel compile"
      else if (name ~ /deploy_fb|flatbuffers/) part = "deployment reader: flatbuffers verifier"
      else if (name ~ /reader::|open_deployment|read_verified|deployment/) part = "deployment reader: the graph from the file"
      else if (name ~ /preparer|assemble_deployment|prepare/) part = "deployment preparation"
      else if (name ~ /frame::|session_core|arena|output_recycler|build_exec|compute_context|check_input|execut|basic_session/) part = "session core and executor"
      else if (name ~ /thread_pool|std::thread|parallel_runtime/) part = "thread pool"
      else if (name ~ /XXH|hash|sectioned|mapped_file/) part = "file header, mapping and hashes"
      else if (name ~ /basic_graph|epstack::node|epstack::value|attribute|type_info|epstack::shape|epstack::model|clone_ptr|opset/) part = "IR graph (nodes, values, attributes)"
      else if (name !~ /epstack/) part = "C++ library templates (std::, boost::) and C runtime"
      bytes[part] += size; sum += size
    }
    END {
      bytes["unwind tables (eh_frame, its index, gcc_except_table)"] = unwind
      bytes["the rest: string literals, alignment, ELF headers, dynamic symbols, PLT, relocations"] = total - sum - unwind
      for (p in bytes) printf "  %9d  %5.1f%%  %s\n", bytes[p], 100 * bytes[p] / total, p | "sort -rn"
      close("sort -rn")
    }'
done
