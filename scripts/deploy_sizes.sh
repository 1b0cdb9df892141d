#!/bin/sh
# What each part of a deployable costs, from its linker map (epstack_deployable links with -Wl,-Map=BINARY.map): bytes
# of code and read-only data kept after --gc-sections, by the object file they come from, grouped into parts. libstdc++,
# libm and libc are linked dynamically and not counted (their PLT stubs and the C runtime's start files are "runtime").
# Usage: scripts/deploy_sizes.sh BINARY [BINARY ...]
set -eu
for bin in "$@"; do
  map="$bin.map"
  [ -f "$map" ] || { echo "deploy_sizes: no linker map $map" >&2; exit 1; }
  stripped=$(mktemp)
  strip -o "$stripped" "$bin"
  total=$(stat -c %s "$stripped")
  rm -f "$stripped"
  echo "$(basename "$bin"): $total bytes stripped"
  # Input sections kept in the output: lines ' .text.x  0xADDR  0xSIZE  object' (or name and numbers on two lines).
  awk '
    /^Discarded input sections/ { skip = 1 }
    /^Linker script and memory map/ { skip = 0 }
    skip { next }
    /^ \.(text|rodata|data|data\.rel\.ro|bss|tbss|tdata|eh_frame|gcc_except_table|init_array|fini_array)/ {
      if (NF >= 4 && $2 ~ /^0x/ && $3 ~ /^0x/) { size = hex($3); obj = $4 }
      else if (NF == 1) { pending = $1; next }
      else next
      add(size, obj, $1); next
    }
    pending != "" && NF >= 3 && $1 ~ /^0x/ && $2 ~ /^0x/ { add(hex($2), $3, pending); pending = ""; next }
    { pending = "" }
    function hex(s,   v, i) { s = tolower(substr(s, 3)); v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
    function add(size, obj, sec,   part, o) {
      if (size == 0) return
      part = "runtime (crt, PLT, libgcc)"
      if (obj ~ /libepstack_cpu\.a/) { o = obj; sub(/.*\(/, "", o); sub(/\.cpp\.o\)/, "", o); part = "kernels: " o }
      if (obj ~ /libepstack_cpu\.a\(provider\.cpp\.o\)/) part = "CPU provider: kernel lookup, parallel compile"
      else if (obj ~ /libepstack_exec\.a/) part = "executor and session core (epstack::exec)"
      else if (obj ~ /libepstack_deploy\.a/) part = "deployment reader (epstack::deploy)"
      else if (obj ~ /libepstack_provider\.a/) part = "provider layer (file header, hashes, EP context binary)"
      else if (obj ~ /libepstack_partition\.a/) part = "partition layer"
      else if (obj ~ /main\.cpp\.o/) part = "the program (session<P...>, std::function, inputs)"
      else if (obj ~ /libstdc\+\+|libm\.|libc\./) part = "libstdc++/libc stubs"
      if (sec ~ /eh_frame|gcc_except/) part = "unwind tables (all parts)"
      bytes[part] += size; total += size
    }
    END { for (p in bytes) printf "  %9d  %5.1f%%  %s\n", bytes[p], 100 * bytes[p] / total, p | "sort -rn"; close("sort -rn");
          printf "  %9d  sections in all (before stripping symbols)\n", total }
  ' "$map"
done
