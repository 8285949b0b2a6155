defmodule Emily.NativeTest do
  use ExUnit.Case, async: true

  import Bitwise
  import EmilyTest.Helpers
  alias Emily.Native

  @root Path.expand("../..", __DIR__)

  describe "the op registry" do
    test "the generated stubs match the engine's op lists, in order" do
      names = Native.op_names()
      ops = Native.ops()
      assert Enum.map(ops.unary, &elem(&1, 0)) == names.unary
      assert Enum.map(ops.binary, &elem(&1, 0)) == names.binary
      assert Enum.map(ops.reduce, &elem(&1, 0)) == names.reduce

      for {op, _} <- ops.unary, do: assert(function_exported?(Native, op, 1))
      for {op, _} <- ops.binary, do: assert(function_exported?(Native, op, 2))
      for {op, _} <- ops.reduce, do: assert(function_exported?(Native, op, 3))
    end

    # Each fallible entry point of emily.h and the Emily.Native function(s)
    # that reach it. A new engine entry point fails this test until it has
    # a NIF (or a line here saying how it is reached).
    @reached_by %{
      "em_from_data" => [from_binary: 3],
      "em_from_external" => [from_binary: 3],
      "em_scalar" => [scalar: 2],
      "em_scalar_f64" => [scalar_f64: 2],
      "em_scalar_s64" => [scalar_s64: 2],
      "em_eval" => [eval: 2],
      "em_array_data" => [to_binary: 2],
      "em_read" => [to_binary: 2],
      "em_stream_new" => [stream_new: 1],
      "em_default_stream" => [eval: 2],
      "em_stream_eval" => [eval: 2, async_eval: 2, to_binary: 2],
      "em_stream_submit" => [synchronize: 1],
      "em_stream_synchronize" => [synchronize: 1],
      "em_unary" => [exp: 1],
      "em_binary" => [add: 2],
      "em_select" => [select: 3],
      "em_clip" => [clip: 3],
      "em_as_type" => [as_type: 2],
      "em_bitcast" => [bitcast: 2],
      "em_iota" => [iota: 3],
      "em_eye" => [eye: 3],
      "em_full" => [full: 3],
      "em_reshape" => [reshape: 2],
      "em_transpose" => [transpose: 2],
      "em_broadcast_to" => [broadcast_to: 2],
      "em_squeeze" => [squeeze: 2],
      "em_expand_dims" => [expand_dims: 2],
      "em_slice" => [slice: 4],
      "em_put_slice" => [put_slice: 3],
      "em_concatenate" => [concatenate: 2],
      "em_reverse" => [reverse: 2],
      "em_contiguous" => [contiguous: 1],
      "em_reduce" => [sum: 3],
      "em_argreduce" => [argmax: 5, argmin: 5],
      "em_dot" => [dot: 6],
      "em_matmul" => [matmul: 2],
      "em_gather" => [gather: 3],
      "em_take" => [take: 3],
      "em_take_along_axis" => [take_along_axis: 3],
      "em_indexed_add" => [indexed_add: 4],
      "em_indexed_put" => [indexed_put: 4],
      "em_indices_in_range" => [indices_in_range: 2]
    }

    test "every em_status entry point of emily.h is reachable from Emily.Native" do
      header = File.read!(Path.join(@root, "include/emily.h"))
      declared = Regex.scan(~r/^em_status (em_\w+)\(/m, header) |> Enum.map(&List.last/1)
      assert declared != []

      for name <- declared do
        funs = Map.get(@reached_by, name)
        assert funs, "#{name} in emily.h has no NIF: add one (and a line to @reached_by)"

        for {fun, arity} <- funs,
            do: assert(function_exported?(Native, fun, arity), "#{fun}/#{arity}")
      end
    end
  end

  describe "elementwise ops" do
    test "unary ops" do
      x = tensor([-1.5, 0.0, 2.25], {:f, 32})
      assert values(Native.negate(x)) == [1.5, -0.0, -2.25]
      assert values(Native.abs(x)) == [1.5, 0.0, 2.25]
      assert values(Native.floor(x)) == [-2.0, 0.0, 2.0]
      assert values(Native.ceil(x)) == [-1.0, 0.0, 3.0]
      assert values(Native.sqrt(tensor([4.0, 9.0], {:f, 64}))) == [2.0, 3.0]
      assert values(Native.exp(tensor([0.0], {:f, 64}))) == [1.0]
      assert values(Native.is_nan(Native.sqrt(tensor([-1.0, 1.0], {:f, 32})))) == [1, 0]
      assert Native.dtype(Native.is_infinity(x)) == {:pred, 8}
      assert values(Native.bitwise_not(tensor([0, -1], {:s, 8}))) == [-1, 0]
      assert values(Native.logical_not(tensor([0, 3], {:u, 8}))) == [1, 0]
    end

    test "binary ops broadcast and follow Nx's integer rules" do
      a = tensor([1, 2, 3, 4, 5, 6], {:s, 32}, [2, 3])
      b = tensor([10, 20, 30], {:s, 32})
      assert values(Native.add(a, b)) == [11, 22, 33, 14, 25, 36]
      assert values(Native.subtract(b, scalar(1, {:s, 32}))) == [9, 19, 29]

      assert values(Native.quotient(tensor([-7, 7], {:s, 32}), tensor([2, 0], {:s, 32}))) == [
               -3,
               0
             ]

      assert values(Native.remainder(tensor([-7, 7], {:s, 32}), tensor([2, -2], {:s, 32}))) == [
               -1,
               1
             ]

      assert values(Native.add(tensor([127], {:s, 8}), tensor([1], {:s, 8}))) == [-128]
      assert values(Native.less(a, scalar(3, {:s, 32}))) == [1, 1, 0, 0, 0, 0]

      assert values(Native.maximum(tensor([1.0, 5.0], {:f, 64}), tensor([3.0, 2.0], {:f, 64}))) ==
               [3.0, 5.0]
    end

    test "select, clip, as_type, bitcast, scalars" do
      p = tensor([1, 0, 1], {:pred, 8})
      t = tensor([1.0, 2.0, 3.0], {:f, 32})
      f = tensor([-1.0, -2.0, -3.0], {:f, 32})
      assert values(Native.select(p, t, f)) == [1.0, -2.0, 3.0]

      assert values(Native.clip(t, scalar(1.5, {:f, 32}), scalar(2.5, {:f, 32}))) == [
               1.5,
               2.0,
               2.5
             ]

      assert values(Native.as_type(tensor([1.7, -1.7], {:f, 32}), {:s, 32})) == [1, -1]

      assert Emily.to_binary(Native.bitcast(tensor([1.0], {:f, 32}), {:u, 32})) ==
               <<1.0::float-32-native>>

      assert values(Native.scalar_f64(2.5, {:f, 64})) == [2.5]
      assert values(Native.scalar_f64(3, {:f, 32})) == [3.0]
      assert values(Native.scalar_s64(-1, {:u, 8})) == [255]
      assert values(Native.scalar(<<7::signed-16-native>>, {:s, 16})) == [7]
    end
  end

  describe "creation, shape and indexing ops" do
    test "iota, eye, full" do
      assert values(Native.iota([2, 3], 1, {:s, 32})) == [0, 1, 2, 0, 1, 2]
      assert values(Native.eye([2, 3], 1, {:u, 8})) == [0, 1, 0, 0, 0, 1]
      assert values(Native.full(scalar(7, {:s, 64}), [2, 2], {:f, 32})) == [7.0, 7.0, 7.0, 7.0]
    end

    test "reshape, transpose, broadcast_to, squeeze, expand_dims, reverse, contiguous" do
      t = Native.iota([6], 0, {:s, 32})
      r = Native.reshape(t, [2, -1])
      assert Native.shape(r) == [2, 3]
      assert values(Native.transpose(r, [1, 0])) == [0, 3, 1, 4, 2, 5]
      assert values(Native.broadcast_to(tensor([1, 2], {:s, 32}), [2, 2])) == [1, 2, 1, 2]
      assert Native.shape(Native.squeeze(Native.reshape(t, [1, 6, 1]), [])) == [6]
      assert Native.shape(Native.expand_dims(t, 0)) == [1, 6]
      assert values(Native.reverse(r, [1])) == [2, 1, 0, 5, 4, 3]
      assert values(Native.contiguous(Native.transpose(r, [1, 0]))) == [0, 3, 1, 4, 2, 5]
      assert Native.ndim(r) == 2 and Native.size(r) == 6 and Native.nbytes(r) == 24
    end

    test "slice, put_slice, concatenate" do
      t = Native.iota([3, 4], 1, {:s, 32})
      assert values(Native.slice(t, [1, 1], [3, 4], [1, 2])) == [1, 3, 1, 3]
      u = tensor([9, 9], {:s, 32}, [1, 2])

      assert values(Native.put_slice(Native.iota([2, 3], 1, {:s, 32}), [1, 1], u)) == [
               0,
               1,
               2,
               0,
               9,
               9
             ]

      a = tensor([1, 2], {:s, 32})
      assert values(Native.concatenate([a, a, tensor([3], {:s, 32})], 0)) == [1, 2, 1, 2, 3]
    end

    test "reductions and arg reductions" do
      t = tensor([1.0, 5.0, 3.0, 4.0, 2.0, 6.0], {:f, 64}, [2, 3])
      assert values(Native.sum(t, nil, false)) == [21.0]
      assert values(Native.sum(t, [1], false)) == [9.0, 12.0]
      # nil reduces every axis, [] none.
      assert Native.shape(Native.sum(t, [], false)) == [2, 3]
      assert Native.shape(Native.max(t, [0], true)) == [1, 3]
      assert values(Native.max(t, [0], true)) == [4.0, 5.0, 6.0]
      assert values(Native.product(t, [-1], false)) == [15.0, 48.0]
      assert values(Native.any(tensor([0, 0, 1], {:u, 8}), nil, false)) == [1]
      assert values(Native.argmax(t, 1, false, false, nil)) == [1, 2]
      assert values(Native.argmin(t, nil, false, false, {:s, 32})) == [0]
      assert Native.dtype(Native.argmax(t, 0, true, true, {:u, 8})) == {:u, 8}
    end

    test "dot and matmul" do
      a = Native.iota([2, 3], 1, {:f, 32})
      b = tensor([1.0, 2.0, 3.0], {:f, 32}, [3, 1])
      assert values(Native.matmul(a, b)) == [8.0, 8.0]
      assert values(Native.dot(a, b, [1], [0], [], [])) == [8.0, 8.0]
      assert Native.shape(Native.dot(a, b, [], [], [], [])) == [2, 3, 3, 1]
    end

    test "gather, take, take_along_axis, indexed_add, indexed_put, indices_in_range" do
      t = Native.iota([3, 2], 0, {:s, 32})
      assert values(Native.take(t, tensor([2, 0], {:s, 64}), 0)) == [2, 2, 0, 0]
      assert values(Native.gather(t, tensor([2, 1, 0, 0], {:s, 32}, [2, 2]), [0, 1])) == [2, 0]
      idx = tensor([1, 0, 0, 1, 1, 0], {:s, 32}, [3, 2])
      assert values(Native.take_along_axis(t, idx, 1)) == [0, 0, 1, 1, 2, 2]
      z = Native.full(scalar(0, {:s, 32}), [3], {:s, 32})
      i = tensor([0, 2, 0], {:s, 32}, [3, 1])
      assert values(Native.indexed_add(z, i, tensor([1, 2, 3], {:s, 32}), [])) == [4, 0, 2]
      assert values(Native.indexed_put(z, i, tensor([1, 2, 3], {:s, 32}), [0])) == [3, 0, 2]
      assert values(Native.indices_in_range(tensor([0, 2], {:s, 32}), 3)) == [1]
      assert values(Native.indices_in_range(tensor([0, 3], {:s, 32}), 3)) == [0]
    end
  end

  describe "errors name the op and the argument" do
    test "engine validation: mismatched shapes and dtypes" do
      a = tensor([1.0, 2.0], {:f, 32})
      b = tensor([1.0, 2.0, 3.0], {:f, 32})
      assert_raise ArgumentError, ~r/add.*\[2\].*\[3\]/, fn -> Native.add(a, b) end
      assert_raise ArgumentError, ~r/add/, fn -> Native.add(a, tensor([1, 2], {:s, 32})) end
      assert_raise ArgumentError, ~r/reshape/, fn -> Native.reshape(b, [2, 2]) end
      assert_raise ArgumentError, ~r/matmul/, fn -> Native.matmul(a, b) end
      assert_raise ArgumentError, ~r/concatenate/, fn -> Native.concatenate([], 0) end
    end

    test "bad axes" do
      t = Native.iota([2, 3], 0, {:f, 32})
      assert_raise ArgumentError, ~r/sum/, fn -> Native.sum(t, [2], false) end
      assert_raise ArgumentError, ~r/sum/, fn -> Native.sum(t, [0, 0], false) end
      assert_raise ArgumentError, ~r/transpose/, fn -> Native.transpose(t, [0, 0]) end
      assert_raise ArgumentError, ~r/argmax/, fn -> Native.argmax(t, 5, false, false, nil) end
      assert_raise ArgumentError, ~r/squeeze/, fn -> Native.squeeze(t, [1]) end
      assert_raise ArgumentError, ~r/take/, fn -> Native.take(t, tensor([0], {:s, 32}), 2) end
    end

    test "out-of-range slices" do
      t = Native.iota([4], 0, {:s, 32})
      assert_raise ArgumentError, ~r/slice/, fn -> Native.slice(t, [0], [5], [1]) end
      assert_raise ArgumentError, ~r/slice/, fn -> Native.slice(t, [3], [1], [1]) end
      assert_raise ArgumentError, ~r/slice/, fn -> Native.slice(t, [-1], [2], [1]) end
      assert_raise ArgumentError, ~r/slice/, fn -> Native.slice(t, [0], [2], [0]) end

      assert_raise ArgumentError,
                   ~r/slice: start, stop and strides need one entry per axis/,
                   fn ->
                     Native.slice(t, [0, 0], [1, 1], [1, 1])
                   end

      assert_raise ArgumentError, ~r/put_slice/, fn ->
        Native.put_slice(t, [3], tensor([1, 2], {:s, 32}))
      end
    end

    test "non-list and non-integer arguments" do
      t = Native.iota([2, 3], 0, {:f, 32})

      assert_raise ArgumentError, ~r/^reshape: argument shape must be a list of integers/, fn ->
        Native.reshape(t, {3, 2})
      end

      assert_raise ArgumentError, ~r/^sum: argument axes must be a list of integers/, fn ->
        Native.sum(t, 0, false)
      end

      assert_raise ArgumentError,
                   ~r/^sum: argument axes must be a list of integers.*got: \[a\]/,
                   fn ->
                     Native.sum(t, [:a], false)
                   end

      assert_raise ArgumentError, ~r/^sum: argument keep_axes must be a boolean/, fn ->
        Native.sum(t, [0], nil)
      end

      assert_raise ArgumentError, ~r/^expand_dims: argument axis must be an integer/, fn ->
        Native.expand_dims(t, 1.0)
      end

      assert_raise ArgumentError, ~r/^transpose: argument axes must be a list of integers/, fn ->
        Native.transpose(t, [1 | 0])
      end

      assert_raise ArgumentError,
                   ~r/^transpose: argument axes must be a list of integers \(32-bit\)/,
                   fn ->
                     Native.transpose(t, [1 <<< 40, 0])
                   end

      assert_raise ArgumentError, ~r/^iota: argument shape has 17 entries, at most 16/, fn ->
        Native.iota(List.duplicate(1, 17), 0, {:f, 32})
      end

      assert_raise ArgumentError, ~r/^as_type: argument dtype must be a dtype/, fn ->
        Native.as_type(t, {:f, 8})
      end

      assert_raise ArgumentError,
                   ~r/^dot: contract_left and contract_right must have the same length/,
                   fn ->
                     Native.dot(t, t, [0], [], [], [])
                   end

      assert_raise ArgumentError,
                   ~r/^concatenate: argument tensors \(element 1\) must be an Emily array/,
                   fn ->
                     Native.concatenate([t, 1], 0)
                   end

      assert_raise ArgumentError, ~r/^scalar: argument value must be a binary of 4 bytes/, fn ->
        Native.scalar(<<1, 2>>, {:f, 32})
      end

      assert_raise ArgumentError, ~r/^scalar_f64: argument value must be a number/, fn ->
        Native.scalar_f64("1", {:f, 32})
      end
    end

    test "handles of the wrong type" do
      stream = Native.stream_new(0)
      t = Native.iota([2], 0, {:f, 32})

      assert_raise ArgumentError,
                   ~r/^exp: argument tensor must be an Emily array reference/,
                   fn ->
                     Native.exp(stream)
                   end

      assert_raise ArgumentError, ~r/^add: argument right must be an Emily array reference/, fn ->
        Native.add(t, make_ref())
      end

      assert_raise ArgumentError,
                   ~r/^eval: argument stream must be an Emily stream reference or nil/,
                   fn ->
                     Native.eval(t, [t])
                   end

      assert_raise ArgumentError, ~r/^stream_close: the default stream cannot be closed/, fn ->
        Native.stream_close(nil)
      end

      Native.stream_close(stream)
    end

    test "a wrong arity is an UndefinedFunctionError, not a crash" do
      assert_raise UndefinedFunctionError, fn -> apply(Native, :add, [1]) end
    end
  end
end
