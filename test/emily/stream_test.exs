defmodule Emily.StreamTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers
  alias Emily.Native

  test "with_stream selects the stream for the calling process and nests" do
    s1 = Emily.Stream.new()
    s2 = Emily.Stream.new()
    assert Emily.Stream.current() == Emily.Stream.default().ref

    Emily.Stream.with_stream(s1, fn ->
      assert Emily.Stream.current() == s1.ref
      Emily.Stream.with_stream(s2, fn -> assert Emily.Stream.current() == s2.ref end)
      assert Emily.Stream.current() == s1.ref
      assert values(Native.add(tensor([1], {:s, 32}), tensor([2], {:s, 32}))) == [3]
    end)

    assert Emily.Stream.current() == Emily.Stream.default().ref
    # The previous stream is restored even when the function raises.
    assert_raise RuntimeError, fn -> Emily.Stream.with_stream(s1, fn -> raise "boom" end) end
    assert Emily.Stream.current() == Emily.Stream.default().ref
    Enum.each([s1, s2], &Emily.Stream.close/1)
  end

  test "several processes on their own streams and on the default stream at once" do
    x = Native.iota([64, 64], 1, {:f, 32})
    expected = Emily.to_binary(Native.matmul(x, x))

    tasks =
      for i <- 1..12 do
        Task.async(fn ->
          run = fn ->
            for _ <- 1..20, do: assert(Emily.to_binary(Native.matmul(x, x)) == expected)
            :ok
          end

          if rem(i, 3) == 0 do
            run.()
          else
            stream = Emily.Stream.new()
            result = Emily.Stream.with_stream(stream, run)
            Emily.Stream.close(stream)
            result
          end
        end)
      end

    assert Enum.all?(Task.await_many(tasks, 60_000), &(&1 == :ok))
  end

  test "a closed stream raises on every later use; close is idempotent" do
    stream = Emily.Stream.new()
    t = tensor([1.0], {:f, 32})
    assert Emily.Stream.close(stream) == :ok
    assert Emily.Stream.close(stream) == :ok

    Emily.Stream.with_stream(stream, fn ->
      assert_raise RuntimeError, ~r/closed/, fn -> Emily.eval(t) end
      assert_raise RuntimeError, ~r/closed/, fn -> Emily.to_binary(t) end
      assert_raise RuntimeError, ~r/closed/, fn -> Emily.async_eval([t]) end
      assert_raise RuntimeError, ~r/closed/, fn -> Emily.Stream.synchronize() end
    end)
  end

  test "closing a busy stream answers every waiting caller" do
    stream = Emily.Stream.new()
    x = Native.iota([256, 256], 1, {:f, 32})
    refs = for _ <- 1..20, do: Native.eval(stream.ref, [Native.matmul(x, x)])
    Emily.Stream.close(stream)

    for ref <- refs do
      # Each job either ran before the close or is cancelled by it.
      try do
        assert Native.await(ref, 30_000) == :ok
      rescue
        e in RuntimeError -> assert e.message =~ "closed"
      end
    end
  end

  test "a full queue raises instead of blocking" do
    stream = Emily.Stream.new(queue_limit: 1)
    x = Native.iota([512, 512], 1, {:f, 32})

    error =
      Enum.find_value(1..200, fn _ ->
        try do
          Native.async_eval(stream.ref, [Native.matmul(x, x)])
          nil
        rescue
          e in RuntimeError -> e
        end
      end)

    assert %RuntimeError{message: message} = error
    assert message =~ "queue is full"
    Emily.Stream.close(stream)
  end

  test "synchronize waits for queued work" do
    stream = Emily.Stream.new()
    t = Native.exp(tensor([0.0], {:f, 32}))
    :ok = Native.async_eval(stream.ref, [t])
    assert Emily.Stream.synchronize(stream) == :ok
    assert Native.is_evaluated(t)
    Emily.Stream.close(stream)
  end

  test "await gives up after the timeout" do
    assert_raise RuntimeError, ~r/timed out after 10ms/, fn -> Native.await(make_ref(), 10) end
  end

  test "bad options" do
    assert_raise ArgumentError, ~r/queue_limit/, fn -> Emily.Stream.new(queue_limit: 0) end

    assert_raise ArgumentError, ~r/stream_new: argument queue_limit/, fn ->
      Native.stream_new(:x)
    end
  end

  test "a stream that is garbage collected stops its worker" do
    # Nothing to observe from Elixir beyond not crashing or leaking: make
    # and drop many streams.
    for _ <- 1..50 do
      s = Emily.Stream.new()
      Emily.Stream.with_stream(s, fn -> Emily.eval(tensor([1], {:u, 8})) end)
    end

    :erlang.garbage_collect()
    assert values(tensor([1], {:u, 8})) == [1]
  end
end
