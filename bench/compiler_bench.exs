# Replay overhead of Emily.Tensor.Compiler (issue #5): microseconds per call of a
# jitted function against the same function run eagerly, seen from Elixir.
#
#   mix run bench/compiler_bench.exs
#
# "build" rows only build the lazy graph (what a call returns); "+ read"
# rows also evaluate and read the result back. Each case runs in batches; a
# batch's time divided by its size is one sample; the table shows the
# median and the 10th/90th percentiles (the machine is shared and noisy:
# compare within one run).

alias Emily.Tensor, as: T

Code.require_file("support/timing.exs", __DIR__)

[a, b, c, d] = for i <- 1..4, do: T.multiply(T.iota({4}, type: :f32), i * 1.0)
Enum.each([a, b, c, d], &T.to_binary/1)

one_op = fn a, b, c, d -> T.concatenate([a, b, c, d]) end

ten_ops = fn a, b, c, d ->
  a
  |> T.add(b)
  |> T.multiply(c)
  |> T.subtract(d)
  |> T.exp()
  |> T.add(a)
  |> T.tanh()
  |> T.multiply(b)
  |> T.add(c)
  |> T.negate()
  |> T.sum()
end

jit_one = Emily.Tensor.Compiler.jit(one_op)
jit_ten = Emily.Tensor.Compiler.jit(ten_ops)
_ = jit_one.(a, b, c, d)
_ = jit_ten.(a, b, c, d)

# The raw NIF call for the same program (no signature, cache or wrapping).
phs = for _ <- 1..4, do: Emily.Native.placeholder({:f, 32}, [4], 0)
out = Emily.Native.concatenate(phs, 0)
program = Emily.Native.program_new(phs, [out], false, false)
refs = Enum.map([a, b, c, d], & &1.ref)

cases = [
  {"1 op, 4 inputs: eager build", fn -> one_op.(a, b, c, d) end},
  {"1 op, 4 inputs: jit replay build", fn -> jit_one.(a, b, c, d) end},
  {"1 op, 4 inputs: Native.program_run only", fn -> Emily.Native.program_run(program, refs) end},
  {"1 op, 4 inputs: eager build + read", fn -> T.to_binary(one_op.(a, b, c, d)) end},
  {"1 op, 4 inputs: jit replay + read", fn -> T.to_binary(jit_one.(a, b, c, d)) end},
  {"10 ops, 4 inputs: eager build", fn -> ten_ops.(a, b, c, d) end},
  {"10 ops, 4 inputs: jit replay build", fn -> jit_ten.(a, b, c, d) end},
  {"10 ops, 4 inputs: eager build + read", fn -> T.to_binary(ten_ops.(a, b, c, d)) end},
  {"10 ops, 4 inputs: jit replay + read", fn -> T.to_binary(jit_ten.(a, b, c, d)) end}
]

IO.puts("Emily.Tensor.Compiler replay overhead, µs per call (#{System.schedulers_online()} schedulers)")

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
