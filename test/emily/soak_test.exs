defmodule Emily.SoakTest do
  @moduledoc """
  Long-running memory and concurrency checks.

  Every test runs by default with the iteration counts of the hardening
  issue (10,000 allocations, 1,000 MLP forwards, 200 round trips of 4 MB,
  32 processes x 100 iterations, 200 killed callers), the whole module in
  well under a minute on two cores. The long form, with ten times as many
  iterations, is tagged `:soak`:

      mix test --only soak test/emily/soak_test.exs

  Figures (iterations, memory deltas, wall time) are printed with
  `EMILY_SOAK_REPORT=1`.
  """
  # Reads process-wide memory counters: nothing else may run meanwhile.
  use ExUnit.Case, async: false

  # Every test is a soak test: `--only soak` selects them and turns on the
  # long form; a plain `mix test` runs the bounded form.
  @moduletag :soak

  import Bitwise
  alias Emily.Native

  @long :soak in Keyword.get(ExUnit.configuration(), :include, [])
  @mb 1 <<< 20

  # {bounded, long}
  @counts %{
    alloc: {10_000, 100_000},
    mlp: {1_000, 10_000},
    roundtrip: {200, 2_000},
    procs: {{32, 100}, {64, 1_000}},
    killed: {200, 2_000}
  }

  defp count(name) do
    {bounded, long} = Map.fetch!(@counts, name)
    if @long, do: long, else: bounded
  end

  defp report(name, fields) do
    if System.get_env("EMILY_SOAK_REPORT") do
      text = Enum.map_join(fields, ", ", fn {k, v} -> "#{k}=#{v}" end)
      IO.puts("\n[soak#{if @long, do: "", else: " bounded"}] #{name}: #{text}")
    end
  end

  # Everything dropped is collected and every queued job has run. Garbage
  # anywhere in the VM counts (a process of an earlier test that is still
  # exiting may hold a resource binary), so every process is collected.
  defp settle do
    Enum.each(Process.list(), &:erlang.garbage_collect/1)
    Emily.Stream.synchronize()
    Enum.each(Process.list(), &:erlang.garbage_collect/1)
    Emily.Memory.stats().active
  end

  # Active bytes once back under `bound`, or after a second of trying (a
  # process that replied may still be exiting with its heap).
  defp settle_below(bound, tries \\ 20) do
    active = settle()

    if active < bound or tries == 0 do
      active
    else
      Process.sleep(50)
      settle_below(bound, tries - 1)
    end
  end

  defp wait_exits_below(bound, tries \\ 20) do
    active = Emily.Memory.stats().active

    if active < bound or tries == 0 do
      active
    else
      Process.sleep(50)
      wait_exits_below(bound, tries - 1)
    end
  end

  defp f32(values), do: for(v <- values, into: <<>>, do: <<v * 1.0::float-32-native>>)

  defp random_f32(n, seed) do
    :rand.seed(:exsss, {seed, seed + 1, seed + 2})
    f32(for _ <- 1..n, do: :rand.uniform() - 0.5)
  end

  # A two-layer perceptron forward: relu(x.w1 + b1).w2, then a sum.
  defp mlp_params(d_in, d_hidden, d_out) do
    %{
      w1: Emily.from_binary(random_f32(d_in * d_hidden, 1), [d_in, d_hidden], {:f, 32}),
      b1: Emily.from_binary(random_f32(d_hidden, 2), [d_hidden], {:f, 32}),
      w2: Emily.from_binary(random_f32(d_hidden * d_out, 3), [d_hidden, d_out], {:f, 32}),
      zero: Native.scalar_f64(0.0, {:f, 32})
    }
  end

  defp mlp(p, x) do
    h = Native.maximum(Native.add(Native.matmul(x, p.w1), p.b1), p.zero)
    y = Native.matmul(h, p.w2)
    {y, Native.sum(y, nil, false)}
  end

  test "allocate/eval/drop loop: active memory returns within 16 MB of its baseline" do
    n = count(:alloc)

    run = fn iterations ->
      for i <- 1..iterations do
        # 1 MB per intermediate, four intermediates per iteration.
        x = Native.full(Native.scalar_f64(i * 1.0, {:f, 32}), [1 <<< 18], {:f, 32})
        y = Native.add(Native.multiply(Native.exp(Native.negate(x)), x), x)
        :ok = Emily.eval(y)
        if rem(i, 10) == 0, do: :erlang.garbage_collect()
      end
    end

    run.(20)
    baseline = settle()
    Emily.Memory.reset_peak()
    {time, _} = :timer.tc(fn -> run.(n) end)
    after_active = settle_below(baseline + 16 * @mb)
    peak = Emily.Memory.stats().peak
    delta = after_active - baseline
    report("alloc", iterations: n, delta_bytes: delta, peak_mb: div(peak, @mb), ms: div(time, 1000))
    assert delta <= 16 * @mb, "active grew by #{delta} bytes over #{n} iterations"
  end

  test "MLP forwards: memory stable, results identical every time" do
    n = count(:mlp)
    p = mlp_params(256, 256, 64)
    x = Emily.from_binary(random_f32(32 * 256, 4), [32, 256], {:f, 32})
    {_, total} = mlp(p, x)
    expected = Emily.to_binary(total)
    baseline = settle()

    {time, _} =
      :timer.tc(fn ->
        for i <- 1..n do
          {y, total} = mlp(p, x)
          :ok = Emily.async_eval([y])
          assert Emily.to_binary(total) == expected
          if rem(i, 10) == 0, do: :erlang.garbage_collect()
        end
      end)

    delta = settle_below(baseline + 4 * @mb) - baseline
    report("mlp", forwards: n, delta_bytes: delta, ms: div(time, 1000))
    assert delta <= 4 * @mb, "active grew by #{delta} bytes over #{n} forwards"
  end

  test "zero-copy to_binary round trips of a 4 MB tensor" do
    n = count(:roundtrip)
    size = 4 * @mb
    src = :crypto.strong_rand_bytes(size)
    zero = Native.scalar_s64(0, {:u, 32})
    warm = Native.add(Emily.from_binary(src, [div(size, 4)], {:u, 32}), zero)
    _ = Emily.to_binary(warm)
    engine0 = settle()
    binary0 = :erlang.memory(:binary)
    {:memory, heap0} = Process.info(self(), :memory)

    {time, _} =
      :timer.tc(fn ->
        for i <- 1..n do
          # from_binary aliases the 4 MB binary; the add makes a fresh
          # engine buffer; to_binary hands that buffer back without a copy.
          t = Emily.from_binary(src, [div(size, 4)], {:u, 32})
          bin = Emily.to_binary(Native.add(t, zero))
          assert bin == src
          if rem(i, 10) == 0, do: :erlang.garbage_collect()
        end
      end)

    engine_delta = settle_below(engine0 + 4 * @mb) - engine0
    binary_delta = :erlang.memory(:binary) - binary0
    {:memory, heap1} = Process.info(self(), :memory)
    heap_delta = heap1 - heap0

    report("roundtrip",
      trips: n,
      engine_delta_bytes: engine_delta,
      beam_binary_delta_bytes: binary_delta,
      heap_delta_bytes: heap_delta,
      ms: div(time, 1000)
    )

    assert engine_delta < 4 * @mb
    assert binary_delta < @mb
    assert heap_delta < @mb
    # The aliased source is intact after all the reads.
    assert Emily.to_binary(Emily.from_binary(src, [div(size, 4)], {:u, 32})) == src
  end

  describe "the resource-binary caveat (Emily.Memory) and its mitigations" do
    # Each read of a 4 MB tensor keeps 4 MB of engine memory alive for as
    # long as its ~64-byte ProcBin lives.
    setup do
      t = Native.iota([1 <<< 20], 0, {:f, 32})
      :ok = Emily.eval(t)
      {:ok, tensor: t, bytes: 4 * @mb}
    end

    defp fresh_read(t), do: Emily.to_binary(Native.negate(t))

    test "held binaries keep their engine buffers alive", %{tensor: t, bytes: bytes} do
      base = settle()
      held = for _ <- 1..8, do: fresh_read(t)
      assert Emily.Memory.stats().active - base >= 8 * bytes
      assert length(held) == 8
    end

    test "garbage_collect/0 returns them", %{tensor: t, bytes: bytes} do
      base = settle()
      for _ <- 1..8, do: fresh_read(t)
      assert settle_below(base + bytes) - base < bytes
    end

    test "reading in a short-lived process returns them when it exits", %{tensor: t, bytes: bytes} do
      base = settle()

      sums =
        for _ <- 1..8 do
          Task.async(fn -> byte_size(fresh_read(t)) end) |> Task.await()
        end

      assert Enum.all?(sums, &(&1 == bytes))
      # Only the exits of the tasks, no collection here, return the memory.
      Emily.Stream.synchronize()
      assert wait_exits_below(base + bytes) - base < bytes
    end

    test ":binary.copy/1 keeps the bytes, not the engine buffer", %{tensor: t, bytes: bytes} do
      base = settle()
      copies = for _ <- 1..4, do: :binary.copy(fresh_read(t))
      assert settle_below(base + bytes) - base < bytes
      assert Enum.all?(copies, &(byte_size(&1) == bytes))
      assert hd(copies) == fresh_read(t)
    end
  end

  test "many processes on separate streams and on the default stream agree bit for bit" do
    {nprocs, iters} = count(:procs)
    p = mlp_params(64, 128, 32)
    x = Emily.from_binary(random_f32(16 * 64, 5), [16, 64], {:f, 32})
    {y, total} = mlp(p, x)
    expected = {Emily.to_binary(y), Emily.to_binary(total)}
    baseline = settle()

    run = fn ->
      for _ <- 1..iters, reduce: true do
        ok ->
          {y, total} = mlp(p, x)
          ok and {Emily.to_binary(y), Emily.to_binary(total)} == expected
      end
    end

    {time, results} =
      :timer.tc(fn ->
        1..(2 * nprocs)
        |> Enum.map(fn i ->
          Task.async(fn ->
            if rem(i, 2) == 0 do
              stream = Emily.Stream.new(:cpu)

              try do
                Emily.Stream.with_stream(stream, run)
              after
                Emily.Stream.close(stream)
              end
            else
              run.()
            end
          end)
        end)
        |> Task.await_many(300_000)
      end)

    delta = settle_below(baseline + 4 * @mb) - baseline
    report("procs", processes: 2 * nprocs, iterations: iters, delta_bytes: delta, ms: div(time, 1000))
    assert Enum.all?(results)
    assert delta <= 4 * @mb
  end

  test "callers killed while their work is in flight leak nothing" do
    n = count(:killed)
    a = Native.iota([512, 512], 1, {:f, 32})
    b = Native.divide(Native.iota([512, 512], 0, {:f, 32}), Native.scalar_f64(1.0e6, {:f, 32}))
    :ok = Emily.eval(a)
    :ok = Emily.eval(b)
    baseline = settle()
    stream = Emily.Stream.new(:cpu)

    try do
      for i <- 1..n do
        parent = self()

        pid =
          spawn(fn ->
            c = Native.exp(Native.matmul(a, b))

            # Submitted before the parent hears of it, so the kill lands
            # while the job is queued or running.
            ref =
              if rem(i, 2) == 0,
                do: Native.eval(stream.ref, [Native.sum(c, nil, false)]),
                else: Native.to_binary(stream.ref, c)

            send(parent, :started)
            Native.await(ref)
          end)

        assert_receive :started, 5_000
        Process.exit(pid, :kill)
        # Work queued by dead callers piles up on the stream otherwise.
        if rem(i, 10) == 0, do: Emily.Stream.synchronize(stream)
      end

      Emily.Stream.synchronize(stream)
    after
      Emily.Stream.close(stream)
    end

    delta = settle_below(baseline + @mb) - baseline
    report("killed", callers: n, delta_bytes: delta)
    assert delta < @mb
  end
end
