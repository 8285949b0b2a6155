# Replay overhead of Emily.Compiler (issue #5): microseconds per call of a
# jitted function against the same function run eagerly, seen from Elixir.
#
#   mix run bench/compiler_bench.exs
#
# "build" rows only build the lazy graph (what a call returns); "+ read"
# rows also evaluate and read the result back. Each case runs in batches; a
# batch's time divided by its size is one sample; the table shows the
# median and the 10th/90th percentiles (the machine is shared and noisy:
# compare within one run).

Nx.default_backend(Emily.Backend)

Code.require_file("support/timing.exs", __DIR__)

[a, b, c, d] = for i <- 1..4, do: Nx.multiply(Nx.iota({4}, type: :f32), i * 1.0)
Enum.each([a, b, c, d], &Nx.to_binary/1)

one_op = fn a, b, c, d -> Nx.concatenate([a, b, c, d]) end

ten_ops = fn a, b, c, d ->
  a
  |> Nx.add(b)
  |> Nx.multiply(c)
  |> Nx.subtract(d)
  |> Nx.exp()
  |> Nx.add(a)
  |> Nx.tanh()
  |> Nx.multiply(b)
  |> Nx.add(c)
  |> Nx.negate()
  |> Nx.sum()
end

jit_one = Nx.Defn.jit(one_op, compiler: Emily.Compiler)
jit_ten = Nx.Defn.jit(ten_ops, compiler: Emily.Compiler)
_ = jit_one.(a, b, c, d)
_ = jit_ten.(a, b, c, d)

# The raw NIF call for the same program (no signature, cache or wrapping).
phs = for _ <- 1..4, do: Emily.Native.placeholder({:f, 32}, [4], 0)
out = Emily.Native.concatenate(phs, 0)
program = Emily.Native.program_new(phs, [out], false, false)
refs = Enum.map([a, b, c, d], & &1.data.ref)

cases = [
  {"1 op, 4 inputs: eager build", fn -> one_op.(a, b, c, d) end},
  {"1 op, 4 inputs: jit replay build", fn -> jit_one.(a, b, c, d) end},
  {"1 op, 4 inputs: Native.program_run only", fn -> Emily.Native.program_run(program, refs) end},
  {"1 op, 4 inputs: eager build + read", fn -> Nx.to_binary(one_op.(a, b, c, d)) end},
  {"1 op, 4 inputs: jit replay + read", fn -> Nx.to_binary(jit_one.(a, b, c, d)) end},
  {"10 ops, 4 inputs: eager build", fn -> ten_ops.(a, b, c, d) end},
  {"10 ops, 4 inputs: jit replay build", fn -> jit_ten.(a, b, c, d) end},
  {"10 ops, 4 inputs: eager build + read", fn -> Nx.to_binary(ten_ops.(a, b, c, d)) end},
  {"10 ops, 4 inputs: jit replay + read", fn -> Nx.to_binary(jit_ten.(a, b, c, d)) end}
]

IO.puts("Emily.Compiler replay overhead, µs per call (#{System.schedulers_online()} schedulers)")

IO.puts(
  String.pad_trailing("case", 52) <>
    String.pad_leading("median", 10) <>
    String.pad_leading("p10", 10) <> String.pad_leading("p90", 10)
)

results =
  for {name, fun} <- cases do
    stats = BenchTiming.measure(fun, 2000, 30)
    BenchTiming.row(name, stats, 52)
    {name, elem(stats, 0)}
  end
  |> Map.new()

ratio = fn x, y -> :erlang.float_to_binary(results[x] / results[y], decimals: 2) end

IO.puts(
  "\nratio jit / eager (build): 1 op #{ratio.("1 op, 4 inputs: jit replay build", "1 op, 4 inputs: eager build")}, " <>
    "10 ops #{ratio.("10 ops, 4 inputs: jit replay build", "10 ops, 4 inputs: eager build")}"
)
