# Per-op overhead seen from Elixir (DESIGN §7): microseconds to build one
# lazy op, and to evaluate and read back a 1-element result.
#
#   mix run bench/overhead.exs
#
# Each case runs in batches; a batch's time divided by its size is one
# sample, and the table shows the median and the 10th/90th percentiles of
# the samples (the machine is shared and noisy: compare within one run).

alias Emily.Native

Code.require_file("support/timing.exs", __DIR__)

f32 = fn values ->
  Emily.from_binary(
    for(v <- values, into: <<>>, do: <<v::float-32-native>>),
    [length(values)],
    {:f, 32}
  )
end

a = f32.([1.0])
b = f32.([2.0])
m = f32.(Enum.map(1..64, &(&1 * 1.0))) |> Native.reshape([8, 8])
:ok = Emily.eval(a)
stream = Emily.Stream.new()

build = [
  {"build add(a, b)  [1-element f32]", fn -> Native.add(a, b) end},
  {"build exp(a)", fn -> Native.exp(a) end},
  {"build sum(m, [1], false)  [8x8]", fn -> Native.sum(m, [1], false) end},
  {"build reshape(m, [4, 16])", fn -> Native.reshape(m, [4, 16]) end},
  {"build transpose(m, [1, 0])", fn -> Native.transpose(m, [1, 0]) end},
  {"build matmul(m, m)", fn -> Native.matmul(m, m) end},
  {"from_binary (4 bytes)",
   fn -> Native.from_binary(<<1.0::float-32-native>>, [1], {:f, 32}) end},
  {"shape(m) + dtype(m)", fn -> {Native.shape(m), Native.dtype(m)} end}
]

# The same ops through Nx on Emily.Backend: the difference to the Native rows
# above is the API layer's cost (Nx's type promotion, option checks, struct
# wrapping and the backend's dispatch).
ta = Nx.tensor([1.0], backend: Emily.Backend)
tb = Nx.tensor([2.0], backend: Emily.Backend)
tm = Nx.iota({8, 8}, type: :f32, backend: Emily.Backend)
sa = Nx.tensor(1.0, backend: Emily.Backend)
sb = Nx.tensor(2.0, backend: Emily.Backend)

tensor_build = [
  {"Nx.add(a, b)  [1-element f32]", fn -> Nx.add(ta, tb) end},
  {"Nx.add(a, 1.0)  [number operand]", fn -> Nx.add(ta, 1.0) end},
  {"Nx.exp(a)", fn -> Nx.exp(ta) end},
  {"Nx.sum(m, axes: [1])", fn -> Nx.sum(tm, axes: [1]) end},
  {"Nx.reshape(m, {4, 16})", fn -> Nx.reshape(tm, {4, 16}) end},
  {"Nx.transpose(m)", fn -> Nx.transpose(tm) end},
  {"Nx.dot(m, m)", fn -> Nx.dot(tm, tm) end}
]

tensor_round_trips = [
  {"Nx.to_binary(Nx.add(a, b))  [build+eval+read]", fn -> Nx.to_binary(Nx.add(ta, tb)) end},
  {"Nx.to_number(Nx.add(a, b))  [scalars]", fn -> Nx.to_number(Nx.add(sa, sb)) end},
  {"Nx.to_number(Nx.sum(Nx.exp(m)))", fn -> Nx.to_number(Nx.sum(Nx.exp(tm))) end}
]

round_trips = [
  {"Emily.eval(add(a, b))", fn -> Emily.eval(Native.add(a, b)) end},
  {"Emily.to_binary(add(a, b))  [build+eval+read]", fn -> Emily.to_binary(Native.add(a, b)) end},
  {"Native.to_binary + await (no telemetry)",
   fn -> Native.await(Native.to_binary(nil, Native.add(a, b))) end},
  {"Emily.to_binary on an own Emily.Stream",
   fn -> Emily.Stream.with_stream(stream, fn -> Emily.to_binary(Native.add(a, b)) end) end},
  {"Emily.to_binary(sum(exp(m)))  [8x8 -> 1]",
   fn -> Emily.to_binary(Native.sum(Native.exp(m), nil, false)) end},
  {"Emily.async_eval([add(a, b)])", fn -> Emily.async_eval([Native.add(a, b)]) end}
]

IO.puts(
  "Emily per-op overhead from Elixir (µs per call), #{System.schedulers_online()} schedulers, " <>
    "Elixir #{System.version()} / OTP #{System.otp_release()}\n"
)

IO.puts(
  String.pad_trailing("case", 46) <>
    Enum.map_join(["median", "p10", "p90"], "", &String.pad_leading(&1, 10))
)

IO.puts(String.duplicate("-", 76))
for {name, fun} <- build, do: BenchTiming.row(name, BenchTiming.measure(fun, 2000, 51), 46)
for {name, fun} <- round_trips, do: BenchTiming.row(name, BenchTiming.measure(fun, 200, 51), 46)
IO.puts(String.duplicate("-", 76))
for {name, fun} <- tensor_build, do: BenchTiming.row(name, BenchTiming.measure(fun, 2000, 51), 46)
for {name, fun} <- tensor_round_trips, do: BenchTiming.row(name, BenchTiming.measure(fun, 200, 51), 46)
Emily.Stream.synchronize()
Emily.Stream.close(stream)
