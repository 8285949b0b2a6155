defmodule Emily.DistributedGPUTest do
  # Emily.Distributed on gpu:0 with one rank: an NCCL communicator (every
  # collective is the identity, inside defn too) and a TCP one taking GPU
  # tensors through host memory. Skipped, with the reason printed, where no
  # GPU is usable (CI); the NCCL case also where libnccl.so.2 is absent.
  # Several ranks need several GPUs: bench/distributed_bench.exs --nccl.
  use ExUnit.Case, async: false

  alias Emily.Distributed

  case Emily.Device.available(:gpu) do
    :ok ->
      :ok

    {:error, reason} ->
      IO.puts("Emily.DistributedGPUTest skipped: #{reason}")
      @moduletag skip: "no usable GPU: #{reason}"
  end

  @gpu {Emily.Backend, device: :gpu}

  defp x, do: Nx.iota({3, 4}, type: :f32, backend: @gpu)

  defp check_identity(comm) do
    x = x()

    for result <- [
          Distributed.all_sum(x, comm),
          Distributed.all_gather(x, comm, axis: 1),
          Distributed.reduce_scatter(x, comm, axis: 1),
          Nx.Defn.jit(&Distributed.all_sum(Nx.multiply(&1, 2), comm),
            compiler: Emily.Compiler,
            device: :gpu
          ).(x)
          |> Nx.divide(2)
        ] do
      assert Nx.to_list(result) == Nx.to_list(x)
      assert Emily.Native.array_device(result.data.ref) == 1
    end

    assert :ok = Distributed.barrier(comm)
  end

  test "an NCCL communicator of one rank" do
    comm =
      try do
        Distributed.init([node()], transport: :nccl, device: {:gpu, 0}, name: :nccl_one)
      rescue
        e in RuntimeError ->
          unless e.message =~ "NCCL is not available", do: reraise(e, __STACKTRACE__)
          IO.puts("NCCL skipped: #{e.message}")
          nil
      end

    if comm do
      check_identity(comm)

      assert_raise ArgumentError, ~r/NCCL/, fn ->
        Distributed.all_sum(Nx.tensor([1.0], backend: {Emily.Backend, device: :cpu}), comm)
      end
    end
  end

  test "a TCP communicator takes GPU tensors through the host" do
    check_identity(Distributed.single())
  end
end
