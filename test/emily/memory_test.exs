defmodule Emily.MemoryTest do
  # Reads process-wide counters (and sets a process-wide limit): run alone.
  use ExUnit.Case, async: false

  import Bitwise
  import EmilyTest.Helpers
  alias Emily.Native

  test "stats, reset_peak, clear_cache" do
    stats = Emily.Memory.stats()

    assert Enum.all?(
             [:active, :peak, :cache, :limit],
             &(is_integer(stats[&1]) and stats[&1] >= 0)
           )

    t = Native.iota([1 <<< 18], 0, {:f, 32})
    :ok = Emily.eval(t)
    assert Emily.Memory.stats().active >= stats.active + (1 <<< 20)
    assert Emily.Memory.reset_peak() == :ok
    %{active: active, peak: peak} = Emily.Memory.stats()
    assert peak == active
    assert Emily.Memory.clear_cache() == :ok
    assert Emily.Memory.stats().cache == 0
    assert_raise ArgumentError, fn -> Emily.Memory.set_limit(-1) end
  end

  test "active memory returns to its baseline after a loop of allocations" do
    run = fn n ->
      for i <- 1..n do
        x = Emily.from_binary(:binary.copy(<<i::32>>, 1 <<< 14), [1 <<< 14], {:f, 32})
        y = Native.multiply(Native.add(x, x), x)
        z = Native.sum(Native.exp(y), [0], false)
        _ = Emily.to_binary(y)
        _ = Emily.to_binary(z)
        if rem(i, 10) == 0, do: :erlang.garbage_collect()
      end

      :erlang.garbage_collect()
      Emily.Stream.synchronize()
    end

    run.(20)
    baseline = Emily.Memory.stats().active
    run.(300)
    assert Emily.Memory.stats().active - baseline <= 1 <<< 20
  end

  test "the memory limit fails evaluation with RuntimeError; async failures surface on the next wait" do
    stream = Emily.Stream.new()

    try do
      Emily.Memory.set_limit(Emily.Memory.stats().active + (1 <<< 20))
      assert Emily.Memory.stats().limit > 0

      Emily.Stream.with_stream(stream, fn ->
        big = Native.full(scalar(1.0, {:f, 32}), [1 <<< 20], {:f, 32})
        assert_raise RuntimeError, ~r/memory limit/, fn -> Emily.eval(big) end

        # async_eval does not wait: the failure is reported by the next job
        # that is waited for on the same stream, then cleared.
        big2 = Native.full(scalar(2.0, {:f, 32}), [1 <<< 20], {:f, 32})
        assert Emily.async_eval([big2]) == :ok
        assert_raise RuntimeError, ~r/memory limit/, fn -> Emily.eval(tensor([1], {:u, 8})) end
        assert Emily.eval(tensor([1], {:u, 8})) == :ok
      end)

      assert_raise RuntimeError, ~r/from_data|memory limit/, fn ->
        Emily.from_binary(:binary.copy(<<0>>, 1 <<< 22), [1 <<< 22], {:u, 8})
        |> Native.negate()
        |> Emily.eval()
      end
    after
      Emily.Memory.set_limit(:infinity)
      Emily.Stream.close(stream)
    end

    assert Emily.Memory.stats().limit == 0
    assert values(Native.add(tensor([1], {:s, 32}), tensor([2], {:s, 32}))) == [3]
  end

  test "to_binary aliases the engine buffer; a large from_binary aliases the binary" do
    n = 1 <<< 20
    t = Native.iota([div(n, 4)], 0, {:f, 32})
    :ok = Emily.eval(t)
    before = :erlang.memory(:binary)
    bin = Emily.to_binary(t)
    assert byte_size(bin) == n
    # The bytes live in the engine's buffer, not in the VM's binary heap.
    assert :erlang.memory(:binary) - before < div(n, 4)

    src = :crypto.strong_rand_bytes(n)
    active = Emily.Memory.stats().active
    aliased = Emily.from_binary(src, [div(n, 4)], {:u, 32})
    assert Emily.Memory.stats().active - active < div(n, 4)
    assert Emily.to_binary(aliased) == src
  end
end
