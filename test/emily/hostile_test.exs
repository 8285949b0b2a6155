defmodule Emily.HostileTest do
  @moduledoc """
  Hostile input: hundreds of bad calls across every public function of
  `Emily`, `Emily.Native`, `Emily.Stream`, `Emily.Memory` and
  `Emily.Telemetry`, all in this one VM, which must survive them. Each call
  must raise `ArgumentError` or `RuntimeError` with a message that names
  the function (or the op it reached).

  Beyond the hand-written cases, every function of `Emily.Native` (found
  with `__info__/1`, so new ones are covered as they land) is called with a
  foreign value in each argument position in turn.
  """
  # Sets the process-wide memory limit in a few cases.
  use ExUnit.Case, async: false

  import Bitwise
  alias Emily.Native

  # Functions of Emily.Native that take no engine argument or are not NIFs.
  @not_nifs [await: 1, await: 2, ops: 0, load_nif: 0, __info__: 1, module_info: 0, module_info: 1]

  # ---- the checker ----------------------------------------------------------

  # A case is {label, names, fun}: fun must raise ArgumentError or
  # RuntimeError whose message contains one of `names`. Returns nil when it
  # does, or what went wrong.
  defp check({label, names, fun}) do
    names = List.wrap(names)

    try do
      result = fun.()
      "#{label}: no exception; returned #{inspect(result, limit: 4, printable_limit: 40)}"
    rescue
      e in [ArgumentError, RuntimeError] ->
        if Enum.any?(names, &String.contains?(e.message, &1)) do
          nil
        else
          "#{label}: the message does not name #{inspect(names)}: #{inspect(e.message)}"
        end

      e ->
        "#{label}: raised #{inspect(e.__struct__)}, not ArgumentError/RuntimeError: " <>
          Exception.message(e)
    end
  end

  defp run_cases(cases) do
    failures = cases |> Enum.map(&check/1) |> Enum.reject(&is_nil/1)

    if System.get_env("EMILY_HOSTILE_REPORT"),
      do: IO.puts("\n[hostile] #{length(cases)} cases, #{length(failures)} failures")

    assert failures == [], "#{length(failures)} of #{length(cases)} cases:\n" <> Enum.join(failures, "\n")
    length(cases)
  end

  # ---- fixtures -----------------------------------------------------------

  defp f32(values, shape), do: Emily.from_binary(for(v <- values, into: <<>>, do: <<v * 1.0::float-32-native>>), shape, {:f, 32})
  defp s32(values, shape), do: Emily.from_binary(for(v <- values, into: <<>>, do: <<v::signed-32-native>>), shape, {:s, 32})

  defp fixtures do
    closed = Emily.Stream.new()
    Emily.Stream.close(closed)

    %{
      m: f32(Enum.to_list(1..6), [2, 3]),
      v: f32([1, 2, 3], [3]),
      s: f32([5], []),
      i: s32([0, 1, 2], [3]),
      f64: Emily.from_binary(<<1.0::float-64-native, 2.0::float-64-native>>, [2], {:f, 64}),
      empty: f32([], [0]),
      stream: Emily.Stream.new(),
      closed: closed
    }
  end

  # Values that are never valid where an engine argument is expected.
  defp foreign(fx) do
    [
      {"a foreign reference", make_ref()},
      {"a stream handle", fx.stream.ref},
      {"the atom :junk", :junk},
      {"a pid", self()},
      {"a tuple", {:not, :a, :tensor}},
      {"a map", %{}},
      {"a huge integer", 1 <<< 80}
    ]
  end

  # ---- Emily.Native, every function, foreign values in each position -------

  test "every Emily.Native function rejects foreign values in every position" do
    fx = fixtures()

    nifs =
      for {name, arity} <- Native.__info__(:functions),
          arity > 0,
          {name, arity} not in @not_nifs,
          do: {name, arity}

    # Sanity: the generated ops and the hand-written NIFs are all there.
    assert length(nifs) > 80

    cases =
      for {name, arity} <- nifs,
          position <- 0..(arity - 1),
          {what, bad} <- foreign(fx),
          # A plausible value elsewhere: the tensor (an invalid shape or
          # dtype in some positions, which must raise too).
          # A stream handle is valid where a stream is taken.
          not (what == "a stream handle" and position == 0 and
                 name in [:stream_close, :eval, :async_eval, :to_binary, :synchronize]) do
        args = List.replace_at(List.duplicate(fx.m, arity), position, bad)

        {"Native.#{name}/#{arity} with #{what} as argument #{position}", Atom.to_string(name),
         fn -> apply(Native, name, args) end}
      end

    count = run_cases(cases)
    assert count >= 300
    :persistent_term.put({__MODULE__, :native_sweep}, count)
  end

  # ---- Emily.Native, semantic errors -----------------------------------------

  test "Emily.Native: shapes, axes, dtypes, ranges and overflows" do
    fx = fixtures()
    %{m: m, v: v, s: s, i: i, f64: f64, empty: empty} = fx
    big = 1 <<< 62

    cases = [
      # scalars
      {"scalar with too few bytes", "scalar", fn -> Native.scalar(<<1, 2>>, {:f, 32}) end},
      {"scalar with an unknown dtype", "scalar", fn -> Native.scalar(<<1>>, {:f, 8}) end},
      {"scalar_f64 of an atom", "scalar_f64", fn -> Native.scalar_f64(:pi, {:f, 32}) end},
      {"scalar_f64 of a string", "scalar_f64", fn -> Native.scalar_f64("1.0", {:f, 32}) end},
      {"scalar_s64 of a float", "scalar_s64", fn -> Native.scalar_s64(1.5, {:s, 32}) end},
      {"scalar_s64 beyond 64 bits", "scalar_s64", fn -> Native.scalar_s64(1 <<< 70, {:s, 64}) end},
      {"scalar_s64 with dtype {:s, 7}", "scalar_s64", fn -> Native.scalar_s64(1, {:s, 7}) end},
      # dtypes
      {"as_type to {:f, 8}", "as_type", fn -> Native.as_type(m, {:f, 8}) end},
      {"as_type to {:q, 32}", "as_type", fn -> Native.as_type(m, {:q, 32}) end},
      {"as_type to a string", "as_type", fn -> Native.as_type(m, "f32") end},
      {"as_type to {:f, -32}", "as_type", fn -> Native.as_type(m, {:f, -32}) end},
      {"as_type to {:f, 32, 1}", "as_type", fn -> Native.as_type(m, {:f, 32, 1}) end},
      {"bitcast f32 to f64", "bitcast", fn -> Native.bitcast(m, {:f, 64}) end},
      {"bitcast f32 to u8", "bitcast", fn -> Native.bitcast(m, {:u, 8}) end},
      {"exp of s32", "exp", fn -> Native.exp(i) end},
      {"bitwise_not of f32", "bitwise_not", fn -> Native.bitwise_not(m) end},
      {"quotient of f32", "quotient", fn -> Native.quotient(m, m) end},
      {"add f32 + s32", "add", fn -> Native.add(v, i) end},
      {"add f32 + f64", "add", fn -> Native.add(v, f64) end},
      {"select with mismatched branches", "select", fn -> Native.select(i, v, i) end},
      {"clip with an f64 bound", "clip", fn -> Native.clip(v, f64, f64) end},
      {"argmax with an f32 index dtype", "argmax", fn -> Native.argmax(m, 0, false, false, {:f, 32}) end},
      # broadcasting
      {"add [2,3] + [2]", "add", fn -> Native.add(m, f32([1, 2], [2])) end},
      {"select with a [2] predicate", "select", fn -> Native.select(f32([1, 0], [2]), m, m) end},
      {"clip with [2] bounds", "clip", fn -> Native.clip(m, f32([0, 1], [2]), s) end},
      # reductions
      {"sum over axis 2 of a matrix", "sum", fn -> Native.sum(m, [2], false) end},
      {"sum over axis -3", "sum", fn -> Native.sum(m, [-3], false) end},
      {"sum over a repeated axis", "sum", fn -> Native.sum(m, [0, 0], false) end},
      {"sum over 9 axes", "sum", fn -> Native.sum(m, Enum.to_list(0..8), false) end},
      {"sum with axes :all", "sum", fn -> Native.sum(m, :all, false) end},
      {"sum with keep_axes 1", "sum", fn -> Native.sum(m, [0], 1) end},
      {"sum with a float axis", "sum", fn -> Native.sum(m, [0.0], false) end},
      {"max with an improper axes list", "max", fn -> Native.max(m, [0 | 1], false) end},
      {"argmax over axis 5", "argmax", fn -> Native.argmax(m, 5, false, false, nil) end},
      {"argmax of an empty axis", "argmax", fn -> Native.argmax(empty, 0, false, false, nil) end},
      {"argmin with tie_high :yes", "argmin", fn -> Native.argmin(m, 0, false, :yes, nil) end},
      {"argmin with an f64 index dtype", "argmin", fn -> Native.argmin(m, 0, false, false, {:f, 64}) end},
      # creation
      {"iota with a negative dimension", "iota", fn -> Native.iota([-1], 0, {:f, 32}) end},
      {"iota with axis 1 of a vector", "iota", fn -> Native.iota([3], 1, {:f, 32}) end},
      {"iota with 17 axes", "iota", fn -> Native.iota(List.duplicate(1, 17), 0, {:f, 32}) end},
      {"iota with an overflowing size", "iota", fn -> Native.iota([big, big], 0, {:f, 32}) end},
      {"iota with 2^63 elements of f64", "iota", fn -> Native.iota([1 <<< 31, 1 <<< 31, 4], 0, {:f, 64}) end},
      {"iota with a NaN-like dimension", "iota", fn -> Native.iota([:nan], 0, {:f, 32}) end},
      {"iota with a float dimension", "iota", fn -> Native.iota([2.5], 0, {:f, 32}) end},
      {"iota with an infinite dimension", "iota", fn -> Native.iota([:infinity], 0, {:f, 32}) end},
      {"iota with a 2^64 dimension", "iota", fn -> Native.iota([1 <<< 64], 0, {:f, 32}) end},
      {"iota with a shape that is not a list", "iota", fn -> Native.iota({2, 3}, 0, {:f, 32}) end},
      {"iota of complex", "iota", fn -> Native.iota([3], 0, {:c, 32}) end},
      {"eye of a vector", "eye", fn -> Native.eye([3], 0, {:f, 32}) end},
      {"eye with k beyond 64 bits", "eye", fn -> Native.eye([3, 3], 1 <<< 70, {:f, 32}) end},
      {"full of a [3] value into [2]", "full", fn -> Native.full(v, [2], {:f, 32}) end},
      {"full with a negative dimension", "full", fn -> Native.full(s, [2, -2], {:f, 32}) end},
      {"full with an overflowing size", "full", fn -> Native.full(s, [big, 4], {:f, 32}) end},
      # shape ops
      {"reshape 6 elements to 4", "reshape", fn -> Native.reshape(m, [4]) end},
      {"reshape with two -1", "reshape", fn -> Native.reshape(m, [-1, -1]) end},
      {"reshape with -2", "reshape", fn -> Native.reshape(m, [-2, -3]) end},
      {"reshape to an overflowing shape", "reshape", fn -> Native.reshape(m, [big, big, 0, -1]) end},
      {"reshape to 17 axes", "reshape", fn -> Native.reshape(m, [6 | List.duplicate(1, 16)]) end},
      {"transpose with a short permutation", "transpose", fn -> Native.transpose(m, [0]) end},
      {"transpose with a repeated axis", "transpose", fn -> Native.transpose(m, [0, 0]) end},
      {"transpose with axis 2", "transpose", fn -> Native.transpose(m, [2, 0]) end},
      {"broadcast [2,3] to [3,3]", "broadcast_to", fn -> Native.broadcast_to(m, [3, 3]) end},
      {"broadcast [2,3] to [3]", "broadcast_to", fn -> Native.broadcast_to(m, [3]) end},
      {"broadcast to a negative dim", "broadcast_to", fn -> Native.broadcast_to(s, [-3]) end},
      {"squeeze a size-3 axis", "squeeze", fn -> Native.squeeze(m, [1]) end},
      {"squeeze axis 7", "squeeze", fn -> Native.squeeze(m, [7]) end},
      {"expand_dims at axis 4", "expand_dims", fn -> Native.expand_dims(m, 4) end},
      {"expand_dims at axis -5", "expand_dims", fn -> Native.expand_dims(m, -5) end},
      {"expand_dims beyond 16 axes", "expand_dims", fn -> Native.expand_dims(Native.reshape(m, [6 | List.duplicate(1, 15)]), 0) end},
      {"slice with a short start", "slice", fn -> Native.slice(m, [0], [2, 3], [1, 1]) end},
      {"slice past the end", "slice", fn -> Native.slice(m, [0, 0], [3, 3], [1, 1]) end},
      {"slice with start > stop", "slice", fn -> Native.slice(m, [1, 2], [0, 3], [1, 1]) end},
      {"slice with stride 0", "slice", fn -> Native.slice(m, [0, 0], [2, 3], [0, 1]) end},
      {"slice with a negative stride", "slice", fn -> Native.slice(m, [0, 0], [2, 3], [-1, 1]) end},
      {"slice with a negative start", "slice", fn -> Native.slice(m, [-1, 0], [2, 3], [1, 1]) end},
      {"slice with a 2^62 stop", "slice", fn -> Native.slice(m, [0, 0], [big, 3], [1, 1]) end},
      {"put_slice of a larger update", "put_slice", fn -> Native.put_slice(v, [0], f32([1, 2, 3, 4], [4])) end},
      {"put_slice out of range", "put_slice", fn -> Native.put_slice(v, [2], f32([1, 2], [2])) end},
      {"put_slice with a rank mismatch", "put_slice", fn -> Native.put_slice(m, [0, 0], v) end},
      {"put_slice with another dtype", "put_slice", fn -> Native.put_slice(v, [0], i) end},
      {"concatenate nothing", "concatenate", fn -> Native.concatenate([], 0) end},
      {"concatenate mismatched dims", "concatenate", fn -> Native.concatenate([m, v], 0) end},
      {"concatenate mixed dtypes", "concatenate", fn -> Native.concatenate([v, i], 0) end},
      {"concatenate along axis 3", "concatenate", fn -> Native.concatenate([m, m], 3) end},
      {"concatenate an improper list", "concatenate", fn -> Native.concatenate([m | m], 0) end},
      {"reverse axis 2", "reverse", fn -> Native.reverse(m, [2]) end},
      {"reverse a repeated axis", "reverse", fn -> Native.reverse(m, [0, -2]) end},
      # linear algebra
      {"matmul [2,3] x [2,3]", "matmul", fn -> Native.matmul(m, m) end},
      {"matmul [3] x [2,3]", "matmul", fn -> Native.matmul(v, m) end},
      {"matmul f32 x f64", "matmul", fn -> Native.matmul(m, Native.as_type(Native.transpose(m, [1, 0]), {:f, 64})) end},
      {"dot with mismatched contracted dims", "dot", fn -> Native.dot(m, m, [1], [1, 0], [], []) end},
      {"dot contracting sizes 3 and 2", "dot", fn -> Native.dot(m, m, [1], [0], [], []) end},
      {"dot contracting axis 5", "dot", fn -> Native.dot(m, m, [5], [0], [], []) end},
      {"dot with a batch axis also contracted", "dot", fn -> Native.dot(m, m, [0], [0], [0], [0]) end},
      {"dot with 9 contracted axes", "dot", fn -> Native.dot(m, m, Enum.to_list(0..8), Enum.to_list(0..8), [], []) end},
      # indexing
      {"take with float indices", "take", fn -> Native.take(m, v, 0) end},
      {"take along axis 2", "take", fn -> Native.take(m, i, 2) end},
      {"take_along_axis with a rank mismatch", "take_along_axis", fn -> Native.take_along_axis(m, i, 0) end},
      {"gather with float indices", "gather", fn -> Native.gather(m, v, [0]) end},
      {"gather with too many index columns", "gather", fn -> Native.gather(m, s32([0, 0, 0], [1, 3]), [0, 1, 0]) end},
      {"gather with axis 4", "gather", fn -> Native.gather(m, s32([0], [1, 1]), [4]) end},
      {"indexed_add with wrong update shape", "indexed_add", fn -> Native.indexed_add(v, s32([0, 1], [2, 1]), v, []) end},
      {"indexed_put with another dtype", "indexed_put", fn -> Native.indexed_put(v, s32([0], [1, 1]), s32([1], [1]), []) end},
      {"indexed_add with float indices", "indexed_add", fn -> Native.indexed_add(v, f32([0], [1, 1]), f32([1], [1]), []) end},
      {"indices_in_range of floats", "indices_in_range", fn -> Native.indices_in_range(v, 3) end},
      {"indices_in_range with an atom bound", "indices_in_range", fn -> Native.indices_in_range(i, :three) end},
      # evaluation and reading
      {"eval of a non-list", "eval", fn -> Native.eval(nil, m) end},
      {"eval of an improper list", "eval", fn -> Native.eval(nil, [m | m]) end},
      {"eval of a list holding junk", "eval", fn -> Native.eval(nil, [m, :junk]) end},
      {"async_eval of a list holding a ref", "async_eval", fn -> Native.async_eval(nil, [make_ref()]) end},
      {"to_binary on a closed stream", "to_binary", fn -> Native.await(Native.to_binary(fx.closed.ref, m), 5_000) end},
      {"eval on a closed stream", "eval", fn -> Native.await(Native.eval(fx.closed.ref, [m]), 5_000) end},
      {"async_eval on a closed stream", "async_eval", fn -> Native.async_eval(fx.closed.ref, [m]) end},
      {"synchronize on a closed stream", "synchronize", fn -> Native.await(Native.synchronize(fx.closed.ref), 5_000) end},
      {"await of a reply that never comes", "timed out", fn -> Native.await(make_ref(), 1) end},
      # from_binary
      {"from_binary of a list", "from_binary", fn -> Native.from_binary([1, 2], [2], {:u, 8}) end},
      {"from_binary of a bitstring", "from_binary", fn -> Native.from_binary(<<1::3>>, [1], {:u, 8}) end},
      {"from_binary with a size mismatch", "from_binary", fn -> Native.from_binary(<<1, 2, 3>>, [2], {:u, 8}) end},
      {"from_binary with a negative dim", "from_binary", fn -> Native.from_binary(<<>>, [-1], {:u, 8}) end},
      {"from_binary with an overflowing shape", "from_binary", fn -> Native.from_binary(<<1>>, [big, big], {:u, 8}) end},
      {"from_binary with 2^63 bytes", "from_binary", fn -> Native.from_binary(<<1>>, [1 <<< 61, 8], {:u, 16}) end},
      {"from_binary with 17 axes", "from_binary", fn -> Native.from_binary(<<1>>, List.duplicate(1, 17), {:u, 8}) end},
      {"from_binary with an atom dim", "from_binary", fn -> Native.from_binary(<<1>>, [:one], {:u, 8}) end},
      {"from_binary with a NaN-like dim", "from_binary", fn -> Native.from_binary(<<1>>, [:nan], {:u, 8}) end},
      {"from_binary with {:u, 3}", "from_binary", fn -> Native.from_binary(<<1>>, [1], {:u, 3}) end},
      {"from_binary with {:pred, 1}", "from_binary", fn -> Native.from_binary(<<1>>, [1], {:pred, 1}) end},
      {"from_binary with {:bf, 32}", "from_binary", fn -> Native.from_binary(<<1, 2, 3, 4>>, [1], {:bf, 32}) end},
      {"from_binary with {:c, 16}", "from_binary", fn -> Native.from_binary(<<1, 2>>, [1], {:c, 16}) end},
      # streams and memory
      {"stream_new with a negative limit", "stream_new", fn -> Native.stream_new(-1) end},
      {"stream_new with a 2^40 limit", "stream_new", fn -> Native.stream_new(1 <<< 40) end},
      {"stream_close of the engine default (nil)", "stream_close", fn -> Native.stream_close(nil) end},
      {"memory_set_limit(-1)", "memory_set_limit", fn -> Native.memory_set_limit(-1) end},
      {"memory_set_limit(2^64)", "memory_set_limit", fn -> Native.memory_set_limit(1 <<< 64) end},
      {"memory_set_limit(1.0)", "memory_set_limit", fn -> Native.memory_set_limit(1.0) end}
    ]

    run_cases(cases)
  end

  test "a huge allocation fails with RuntimeError and the VM carries on" do
    fx = fixtures()
    limit = Emily.Memory.stats().active + (64 <<< 20)

    try do
      Emily.Memory.set_limit(limit)

      cases =
        for {label, build} <- [
              {"iota of 2^40 bytes", fn -> Native.iota([1 <<< 38], 0, {:f, 32}) end},
              {"full of 2^44 bytes", fn -> Native.full(fx.s, [1 <<< 20, 1 <<< 22], {:f, 32}) end},
              {"broadcast then negate of 2^42 bytes", fn -> Native.negate(Native.broadcast_to(fx.s, [1 <<< 40])) end},
              {"outer product of 2^41 bytes", fn -> Native.dot(Native.iota([1 <<< 20], 0, {:f, 64}), Native.iota([1 <<< 18], 0, {:f, 64}), [], [], [], []) end},
              {"to_binary of 2^40 bytes", fn -> Native.iota([1 <<< 40], 0, {:u, 8}) end}
            ],
            reader <- [:eval, :to_binary] do
          {"#{label} (#{reader})", ["memory", "out of memory", "eval", "to_binary"],
           fn ->
             t = build.()
             if reader == :eval, do: Emily.eval(t), else: Emily.to_binary(t)
           end}
        end

      run_cases(cases)
    after
      Emily.Memory.set_limit(:infinity)
    end

    assert Emily.to_binary(Native.add(fx.v, fx.v)) == Emily.to_binary(f32([2, 4, 6], [3]))
  end

  # ---- Emily --------------------------------------------------------------------

  test "Emily: every public function" do
    fx = fixtures()

    bad_tensors = [{"a ref", make_ref()}, {"a stream", fx.stream.ref}, {"an atom", :x}, {"a list", [1, 2]}, {"a number", 1.5}]

    cases =
      for {what, bad} <- bad_tensors,
          {name, names, fun} <- [
            {"to_binary", ["to_binary", "shape"], &Emily.to_binary/1},
            {"shape", "shape", &Emily.shape/1},
            {"dtype", "dtype", &Emily.dtype/1},
            {"eval", "eval", &Emily.eval/1},
            {"async_eval", "async_eval", &Emily.async_eval([&1])},
            {"gather", "gather", &Emily.gather(&1, fx.i, [0])},
            {"take", "take", &Emily.take(&1, fx.i, 0)},
            {"take_along_axis", "take_along_axis", &Emily.take_along_axis(&1, fx.i, 0)},
            {"indexed_add", "indexed_add", &Emily.indexed_add(&1, fx.i, fx.v, [])},
            {"indexed_put", "indexed_put", &Emily.indexed_put(&1, fx.i, fx.v, [])},
            {"matmul", "matmul", &Emily.matmul(&1, fx.m)},
            {"check_finite", ["check_finite", "dtype", "matmul"], &Emily.check_finite(:matmul, Native.matmul(&1, fx.m))}
          ] do
        {"Emily.#{name} of #{what}", names, fn -> fun.(bad) end}
      end

    from_binary_cases = [
      {"from_binary of an integer", "from_binary", fn -> Emily.from_binary(42, [1], {:u, 8}) end},
      {"from_binary with a size mismatch", "from_binary", fn -> Emily.from_binary(<<0::32>>, [2], {:f, 32}) end},
      {"from_binary with an unknown dtype", "from_binary", fn -> Emily.from_binary(<<0::32>>, [1], {:g, 32}) end},
      {"from_binary with a dtype atom", "from_binary", fn -> Emily.from_binary(<<0::32>>, [1], :f32) end},
      {"from_binary with a shape tuple", "from_binary", fn -> Emily.from_binary(<<0::32>>, {1}, {:f, 32}) end},
      {"from_binary with a float dim", "from_binary", fn -> Emily.from_binary(<<0::32>>, [1.0], {:f, 32}) end},
      {"from_binary with a nil dim", "from_binary", fn -> Emily.from_binary(<<0::32>>, [nil], {:f, 32}) end},
      {"from_binary with a 2^64 dim", "from_binary", fn -> Emily.from_binary(<<0::32>>, [1 <<< 64], {:f, 32}) end},
      {"from_binary with a negative dim", "from_binary", fn -> Emily.from_binary(<<>>, [3, -1], {:f, 32}) end},
      {"from_binary with 2^62 x 2^62", "from_binary", fn -> Emily.from_binary(<<>>, [1 <<< 62, 1 <<< 62], {:f, 32}) end}
    ]

    run_cases(cases ++ from_binary_cases)
  end

  # ---- Emily.Stream, Emily.Memory, Emily.Telemetry ------------------------------

  test "Emily.Stream, Emily.Memory and Emily.Telemetry" do
    fx = fixtures()
    t = fx.v

    stream_cases = [
      {"Stream.new(:gpu)", "CUDA backend is not available", fn -> Emily.Stream.new(:gpu) end},
      {"Stream.new(:cuda)", "CUDA backend is not available", fn -> Emily.Stream.new(:cuda) end},
      {"Stream.new(:tpu)", "Emily.Stream.new", fn -> Emily.Stream.new(:tpu) end},
      {"Stream.new(\"cpu\")", "Emily.Stream.new", fn -> Emily.Stream.new("cpu") end},
      {"Stream.new(42)", "Emily.Stream.new", fn -> Emily.Stream.new(42) end},
      {"Stream.new(:gpu, queue_limit: 4)", "CUDA", fn -> Emily.Stream.new(:gpu, queue_limit: 4) end},
      {"Stream.new(queue_limit: 0)", "Emily.Stream.new", fn -> Emily.Stream.new(queue_limit: 0) end},
      {"Stream.new(queue_limit: -5)", "Emily.Stream.new", fn -> Emily.Stream.new(queue_limit: -5) end},
      {"Stream.new(queue_limit: 2^40)", "Emily.Stream.new", fn -> Emily.Stream.new(queue_limit: 1 <<< 40) end},
      {"Stream.new(queue_limit: :many)", "Emily.Stream.new", fn -> Emily.Stream.new(queue_limit: :many) end},
      {"Stream.new(queue_limit: 1.5)", "Emily.Stream.new", fn -> Emily.Stream.new(queue_limit: 1.5) end},
      {"Stream.new(:cpu, :fast)", "Emily.Stream.new", fn -> Emily.Stream.new(:cpu, :fast) end},
      {"Stream.new(:cpu, bogus: 1)", "Emily.Stream.new", fn -> Emily.Stream.new(:cpu, bogus: 1) end},
      {"Stream.new(:cpu, [1, 2])", "Emily.Stream.new", fn -> Emily.Stream.new(:cpu, [1, 2]) end},
      {"with_stream(nil, fun)", "Emily.Stream.with_stream", fn -> Emily.Stream.with_stream(nil, fn -> :ok end) end},
      {"with_stream(ref, fun)", "Emily.Stream.with_stream", fn -> Emily.Stream.with_stream(fx.stream.ref, fn -> :ok end) end},
      {"with_stream(stream, arity 1)", "Emily.Stream.with_stream", fn -> Emily.Stream.with_stream(fx.stream, fn _ -> :ok end) end},
      {"with_stream(stream, :fun)", "Emily.Stream.with_stream", fn -> Emily.Stream.with_stream(fx.stream, :fun) end},
      {"with_stream of a forged struct", ["eval", "stream"], fn -> Emily.Stream.with_stream(%Emily.Stream{ref: make_ref()}, fn -> Emily.eval(t) end) end},
      {"with_stream of a closed stream", ["eval", "closed"], fn -> Emily.Stream.with_stream(fx.closed, fn -> Emily.eval(t) end) end},
      {"to_binary in a closed stream", ["to_binary", "closed"], fn -> Emily.Stream.with_stream(fx.closed, fn -> Emily.to_binary(t) end) end},
      {"async_eval in a closed stream", ["async_eval", "closed"], fn -> Emily.Stream.with_stream(fx.closed, fn -> Emily.async_eval([t]) end) end},
      {"close(nil)", "Emily.Stream.close", fn -> Emily.Stream.close(nil) end},
      {"close(ref)", "Emily.Stream.close", fn -> Emily.Stream.close(fx.stream.ref) end},
      {"close(default)", "default stream cannot be closed", fn -> Emily.Stream.close(Emily.Stream.default()) end},
      {"close of a forged struct", "stream_close", fn -> Emily.Stream.close(%Emily.Stream{ref: make_ref()}) end},
      {"synchronize(:x)", "Emily.Stream.synchronize", fn -> Emily.Stream.synchronize(:x) end},
      {"synchronize(ref)", "Emily.Stream.synchronize", fn -> Emily.Stream.synchronize(make_ref()) end},
      {"synchronize(closed)", ["synchronize", "closed"], fn -> Emily.Stream.synchronize(fx.closed) end},
      {"synchronize(forged)", "synchronize", fn -> Emily.Stream.synchronize(%Emily.Stream{ref: make_ref()}) end}
    ]

    memory_cases = [
      {"set_limit(-1)", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit(-1) end},
      {"set_limit(1.5)", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit(1.5) end},
      {"set_limit(:none)", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit(:none) end},
      {"set_limit(nil)", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit(nil) end},
      {"set_limit(\"1GB\")", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit("1GB") end},
      {"set_limit(2^64)", "Emily.Memory.set_limit", fn -> Emily.Memory.set_limit(1 <<< 64) end},
      {"stats(:gpu)", "CUDA backend is not available", fn -> Emily.Memory.stats(:gpu) end},
      {"stats(:tpu)", "Emily.Memory.stats", fn -> Emily.Memory.stats(:tpu) end},
      {"stats(nil)", "Emily.Memory.stats", fn -> Emily.Memory.stats(nil) end}
    ]

    handler = fn _, _, _, _ -> :ok end

    telemetry_cases = [
      {"attach to []", "Emily.Telemetry", fn -> Emily.Telemetry.attach(:h1, [], handler, nil) end},
      {"attach to a string event", "Emily.Telemetry", fn -> Emily.Telemetry.attach(:h2, "emily.eval", handler, nil) end},
      {"attach to [\"emily\"]", "Emily.Telemetry", fn -> Emily.Telemetry.attach(:h3, ["emily"], handler, nil) end},
      {"attach to [:emily, 1]", "Emily.Telemetry", fn -> Emily.Telemetry.attach(:h4, [:emily, 1], handler, nil) end},
      {"attach_many with a bad name", "Emily.Telemetry", fn -> Emily.Telemetry.attach_many(:h5, [[:ok], :bad], handler, nil) end},
      {"attach_many with []-event", "Emily.Telemetry", fn -> Emily.Telemetry.attach_many(:h6, [[]], handler, nil) end}
    ]

    run_cases(stream_cases ++ memory_cases ++ telemetry_cases)

    # Guard-protected Elixir functions raise FunctionClauseError, which names
    # the function too.
    for fun <- [
          fn -> Emily.Telemetry.attach_many(:h7, :not_a_list, handler, nil) end,
          fn -> Emily.Telemetry.attach(:h8, [:emily, :x], fn -> :ok end, nil) end,
          fn -> Emily.Telemetry.execute([:emily, :x], "measure", %{}) end,
          fn -> Emily.Telemetry.execute([:emily, :x], %{}, :meta) end,
          fn -> Emily.Telemetry.span(:not_a_list, %{}, fn -> {:ok, %{}} end) end,
          fn -> Emily.Telemetry.span([:emily, :x], %{}, :not_a_fun) end
        ] do
      assert_raise FunctionClauseError, ~r/Emily\.Telemetry/, fun
    end

    # Nothing leaked into the handler table, and the VM still computes.
    assert Emily.Telemetry.detach(:h1) == {:error, :not_found}
    assert Emily.to_binary(Native.negate(t)) == Emily.to_binary(f32([-1, -2, -3], [3]))
    Emily.Stream.close(fx.stream)
  end

  test "released handles: closed and collected streams, dead callers" do
    fx = fixtures()
    # A stream used after its owner process died and it was closed.
    parent = self()

    spawn(fn ->
      s = Emily.Stream.new()
      send(parent, {:stream, s})
    end)

    assert_receive {:stream, s}
    Emily.Stream.close(s)

    cases =
      for {label, fun} <- [
            {"eval", fn -> Emily.Stream.with_stream(s, fn -> Emily.eval(fx.v) end) end},
            {"to_binary", fn -> Emily.Stream.with_stream(s, fn -> Emily.to_binary(fx.v) end) end},
            {"async_eval", fn -> Emily.Stream.with_stream(s, fn -> Emily.async_eval([fx.v]) end) end},
            {"synchronize", fn -> Emily.Stream.synchronize(s) end}
          ],
          _ <- 1..3 do
        {"#{label} on a stream closed after its owner died", [label, "closed"], fun}
      end

    run_cases(cases)
    Emily.Stream.close(fx.stream)
  end

  test "at least 300 hostile calls in all" do
    # Counted from the case lists above (the sweep is counted when it runs;
    # recount here so the test order does not matter).
    fx = fixtures()

    sweep =
      for {name, arity} <- Native.__info__(:functions),
          arity > 0,
          {name, arity} not in @not_nifs,
          position <- 0..(arity - 1),
          {what, _} <- foreign(fx),
          not (what == "a stream handle" and position == 0 and
                 name in [:stream_close, :eval, :async_eval, :to_binary, :synchronize]),
          reduce: 0,
          do: (n -> n + 1)

    assert sweep >= 300
    Emily.Stream.close(fx.stream)
  end
end
