defmodule EmilyTest do
  use ExUnit.Case, async: true
  doctest Emily

  import Bitwise
  import EmilyTest.Helpers
  alias Emily.Native

  @dtypes EmilyTest.Helpers.nx_types() ++ [{:pred, 8}]

  describe "from_binary/3 and to_binary/1" do
    test "round-trip every dtype byte for byte" do
      for {_, bits} = dtype <- @dtypes do
        bytes = div(bits, 8)
        binary = for i <- 1..(6 * bytes), into: <<>>, do: <<rem(i * 37, 256)>>

        binary =
          if dtype == {:pred, 8},
            do: for(<<b <- binary>>, into: <<>>, do: <<rem(b, 2)>>),
            else: binary

        t = Emily.from_binary(binary, [2, 3], dtype)
        assert Emily.shape(t) == [2, 3]
        assert Emily.dtype(t) == dtype
        assert Emily.to_binary(t) == binary, "round trip of #{inspect(dtype)}"
      end
    end

    test "edge values survive the round trip" do
      assert values(tensor([-128, 127, 0], {:s, 8})) == [-128, 127, 0]

      assert values(tensor([0, 18_446_744_073_709_551_615], {:u, 64})) == [
               0,
               18_446_744_073_709_551_615
             ]

      nan_inf =
        <<0x7FC00000::32-native, 0x7F800000::32-native, 0xFF800000::32-native,
          0x80000000::32-native>>

      assert Emily.to_binary(Emily.from_binary(nan_inf, [4], {:f, 32})) == nan_inf
    end

    test "0-d scalars and empty tensors" do
      t = Emily.from_binary(<<42::signed-32-native>>, [], {:s, 32})
      assert Emily.shape(t) == []
      assert Emily.to_binary(t) == <<42::signed-32-native>>

      for shape <- [[0], [3, 0], [0, 1_000_000_000_000]] do
        e = Emily.from_binary(<<>>, shape, {:f, 32})
        assert Emily.shape(e) == shape
        assert Emily.to_binary(e) == <<>>
      end
    end

    test "large binaries (aliased) and unaligned sub-binaries (copied) round-trip" do
      big = :crypto.strong_rand_bytes(1 <<< 20)
      assert Emily.to_binary(Emily.from_binary(big, [div(1 <<< 20, 4)], {:f, 32})) == big

      # A sub-binary at an odd offset cannot be aliased as f32: it is copied,
      # on a dirty scheduler since it is large.
      n = 2 <<< 20
      <<_, odd::binary-size(n), _::binary>> = :crypto.strong_rand_bytes(n + 8)
      assert Emily.to_binary(Emily.from_binary(odd, [div(n, 4)], {:f, 32})) == odd
    end

    test "an aliased binary that is still being appended to keeps its bytes" do
      # Appending in a loop makes a writable binary with spare capacity.
      acc = Enum.reduce(1..40_000, <<>>, fn i, acc -> <<acc::binary, i::32-native>> end)
      t = Emily.from_binary(acc, [40_000], {:u, 32})
      grown = Enum.reduce(1..40_000, acc, fn i, acc -> <<acc::binary, -i::32-native>> end)
      assert byte_size(grown) == 2 * byte_size(acc)
      assert Emily.to_binary(t) == acc
      assert values(Native.sum(t, nil, false)) == [div(40_000 * 40_001, 2)]
    end

    test "to_binary of a strided view is the row-major copy" do
      t = tensor(Enum.to_list(0..5), {:s, 32}, [2, 3])
      assert values(Native.transpose(t, [1, 0])) == [0, 3, 1, 4, 2, 5]
      assert values(Native.slice(t, [0, 0], [2, 3], [1, 2])) == [0, 2, 3, 5]
    end

    test "the returned binary stays valid and unchanged after its tensor is gone" do
      {bin, later} =
        (fn ->
           x = tensor([1.0, 2.0, 3.0, 4.0], {:f, 32})
           z = Native.add(x, x)
           bin = Emily.to_binary(z)
           # negate(z) is the kind of op that may reuse a dead input's buffer.
           {bin, Native.negate(z)}
         end).()

      :erlang.garbage_collect()
      assert values(later) == [-2.0, -4.0, -6.0, -8.0]
      assert decode(bin, {:f, 32}) == [2.0, 4.0, 6.0, 8.0]
    end

    test "reads in many processes at once" do
      t = Native.multiply(tensor(Enum.to_list(1..100), {:s, 64}), scalar(3, {:s, 64}))
      expected = encode(Enum.map(1..100, &(&1 * 3)), {:s, 64})

      1..32
      |> Task.async_stream(fn _ -> Emily.to_binary(t) end, max_concurrency: 32)
      |> Enum.each(fn {:ok, bin} -> assert bin == expected end)
    end
  end

  describe "shape/1, dtype/1" do
    test "read metadata without evaluating" do
      a = tensor([1.0, 2.0], {:f, 32})
      b = Native.exp(Native.add(a, a))
      assert Emily.shape(b) == [2]
      assert Emily.dtype(b) == {:f, 32}
      refute Native.is_evaluated(b)
      assert Emily.dtype(Native.less(a, b)) == {:pred, 8}
      assert :ok = Emily.eval(b)
      assert Native.is_evaluated(b)
    end
  end

  describe "eval/1, async_eval/1" do
    test "eval materialises, async_eval enqueues" do
      a = tensor([1.0, 2.0, 3.0], {:f, 32})
      b = Native.add(a, a)
      c = Native.multiply(a, a)
      assert Emily.async_eval([b, c]) == :ok
      assert Emily.eval(b) == :ok
      assert values(c) == [1.0, 4.0, 9.0]
      assert Emily.async_eval([]) == :ok
    end

    test "an engine failure during eval raises ArgumentError or RuntimeError" do
      # quotient on floats is refused when the node is built.
      a = tensor([1.0], {:f, 32})
      assert_raise ArgumentError, ~r/quotient/, fn -> Native.quotient(a, a) end
    end
  end

  describe "from_binary/3 errors" do
    test "wrong byte size" do
      assert_raise ArgumentError,
                   ~r/from_binary: binary size mismatch: shape \[2\] of f32 needs 8 bytes, got 4/,
                   fn ->
                     Emily.from_binary(<<0::32>>, [2], {:f, 32})
                   end
    end

    test "negative and huge dimensions, overflow" do
      assert_raise ArgumentError, ~r/negative dimension -1/, fn ->
        Emily.from_binary(<<>>, [2, -1], {:f, 32})
      end

      assert_raise ArgumentError, ~r/byte size overflow/, fn ->
        Emily.from_binary(<<>>, [1 <<< 40, 1 <<< 40], {:f, 32})
      end

      assert_raise ArgumentError, ~r/byte size overflow/, fn ->
        Emily.from_binary(<<>>, [1 <<< 62], {:f, 64})
      end

      assert_raise ArgumentError, ~r/shape must be a list of integers/, fn ->
        Emily.from_binary(<<>>, [1 <<< 64], {:f, 32})
      end

      assert_raise ArgumentError, ~r/at most 16/, fn ->
        Emily.from_binary(<<0::32>>, List.duplicate(1, 17), {:f, 32})
      end
    end

    test "non-list shape, non-binary data, unknown dtypes" do
      assert_raise ArgumentError, ~r/from_binary: argument shape must be a list/, fn ->
        Emily.from_binary(<<0::32>>, {1}, {:f, 32})
      end

      assert_raise ArgumentError,
                   ~r/from_binary: argument shape must be a list of integers/,
                   fn ->
                     Emily.from_binary(<<0::32>>, [1.0], {:f, 32})
                   end

      assert_raise ArgumentError, ~r/from_binary: argument binary must be a binary/, fn ->
        Emily.from_binary([1, 2], [2], {:u, 8})
      end

      for bad <- [{:f, 8}, {:x, 32}, :f32, {:f, 32, 1}, {:bf, 32}, {:pred, 16}] do
        assert_raise ArgumentError, ~r/from_binary: argument dtype must be a dtype/, fn ->
          Emily.from_binary(<<0::32>>, [1], bad)
        end
      end
    end

    test "the wrong handle type" do
      stream = Emily.Stream.new()

      assert_raise ArgumentError,
                   ~r/shape: argument tensor must be an Emily array reference/,
                   fn ->
                     Emily.shape(stream.ref)
                   end

      assert_raise ArgumentError, ~r/must be an Emily array reference/, fn ->
        Emily.to_binary(make_ref())
      end

      assert_raise ArgumentError, ~r/eval: argument tensors \(element 0\)/, fn ->
        Emily.eval(:nope)
      end

      Emily.Stream.close(stream)
    end
  end
end
