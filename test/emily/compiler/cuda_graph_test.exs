defmodule Emily.CudaGraphTest.Fns do
  @moduledoc false
  import Nx.Defn

  defn step(x, w) do
    h = Nx.dot(x, w)
    Nx.exp(h - Nx.reduce_max(h, axes: [1], keep_axes: true)) |> Nx.multiply(1.5) |> Nx.add(x)
  end

  defn loop(x) do
    while {x, i = 0}, i < 4 do
      {x * 1.5 + i, i + 1}
    end
  end

  defn hooked_loop(x) do
    while {x, i = 0}, i < 4 do
      # The hook's value joins the state so that it is not dead code.
      {x * 1.5 + i + hook(Nx.sum(x), :step) * 0.0, i + 1}
    end
  end
end

defmodule Emily.CudaGraphTest do
  # Emily.Compiler's `cuda_graph: true`: on the CPU it changes nothing; on a
  # GPU (skipped without one, with the reason printed) each call after the
  # first replays one CUDA graph, with the same results as without it; a
  # while loop's condition and body are replayed as graphs per iteration,
  # hooks inside it still fire once per iteration.
  use ExUnit.Case, async: false

  alias Emily.CudaGraphTest.Fns

  @cpu {Emily.Backend, device: :cpu}
  @gpu {Emily.Backend, device: :gpu}

  defp rand(shape, seed) do
    {t, _} = Nx.Random.uniform(Nx.Random.key(seed), -1.0, 1.0, shape: shape, type: :f32)
    Nx.backend_copy(t, @cpu)
  end

  defp jit(fun, opts), do: Nx.Defn.jit(fun, [compiler: Emily.Compiler] ++ opts)

  test "on the CPU the option changes nothing" do
    {x, w} = {rand({8, 16}, 1), rand({16, 16}, 2)}
    want = jit(&Fns.step/2, []).(x, w)
    got = jit(&Fns.step/2, cuda_graph: true).(x, w)
    assert Nx.to_binary(got) == Nx.to_binary(want)
  end

  describe "on a GPU" do
    case Emily.Device.available(:gpu) do
      :ok ->
        :ok

      {:error, reason} ->
        IO.puts("Emily.CudaGraphTest GPU cases skipped: #{reason}")
        @describetag skip: "no usable GPU: #{reason}"
    end

    test "replays match the ordinary replay, call after call, outputs kept" do
      w = Nx.backend_copy(rand({16, 16}, 3), @gpu)
      plain = jit(&Fns.step/2, device: :gpu)
      graph = jit(&Fns.step/2, device: :gpu, cuda_graph: true)

      outputs =
        for seed <- 10..15 do
          x = Nx.backend_copy(rand({8, 16}, seed), @gpu)
          got = graph.(x, w)
          assert Nx.to_binary(got) == Nx.to_binary(plain.(x, w))
          {got, Nx.to_binary(got)}
        end

      # Results of earlier calls are not overwritten by later replays.
      for {t, bytes} <- outputs, do: assert(Nx.to_binary(t) == bytes)
    end

    test "a while loop replays as graphs per iteration, as the ordinary replay" do
      x = Nx.backend_copy(rand({33}, 4), @gpu)
      {want, _} = jit(&Fns.loop/1, device: :gpu).(x)
      graph = jit(&Fns.loop/1, device: :gpu, cuda_graph: true)

      for _ <- 1..3 do
        {got, _} = graph.(x)
        assert Nx.to_binary(got) == Nx.to_binary(want)
      end
    end

    test "hooks inside a loop replayed as graphs fire once per iteration" do
      hooked_loop_fires_per_iteration(:gpu)
    end
  end

  test "on the CPU hooks inside a loop fire with the option as without it" do
    hooked_loop_fires_per_iteration(:cpu)
  end

  defp hooked_loop_fires_per_iteration(device) do
    parent = self()
    x = Nx.backend_copy(rand({33}, 5), {Emily.Backend, device: device})
    hooks = %{step: &send(parent, {:step, Nx.to_number(&1)})}
    {want, _} = jit(&Fns.hooked_loop/1, device: device, hooks: hooks).(x)
    plain_sums = for _ <- 1..4, do: assert_receive({:step, _})
    graph = jit(&Fns.hooked_loop/1, device: device, cuda_graph: true, hooks: hooks)

    for _ <- 1..2 do
      {got, _} = graph.(x)
      assert Nx.to_binary(got) == Nx.to_binary(want)
      assert for(_ <- 1..4, do: assert_receive({:step, _})) == plain_sums
      refute_received {:step, _}
    end
  end
end
