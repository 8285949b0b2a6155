Code.require_file("../support/distributed_peers.exs", __DIR__)
Code.require_file("../support/tp_decode_ranks.exs", __DIR__)

defmodule Emily.TPDecodeGPUTest do
  # Tensor-parallel decode (examples/support/qwen3_tp.exs) on GPUs against
  # one process on the CPU: 2 ranks on gpu:0 over TCP (GPU tensors through
  # host memory; one GPU is enough), and 2 ranks on gpu:0 and gpu:1 over
  # NCCL (needs 2 GPUs and libnccl.so.2). Skipped, with the reason printed,
  # where they are missing (CI).
  use ExUnit.Case, async: false

  alias EmilyTest.DistributedPeers, as: Peers
  alias EmilyTest.TPDecodeRanks, as: Ranks

  case Emily.Device.available(:gpu) do
    :ok ->
      :ok

    {:error, reason} ->
      IO.puts("Emily.TPDecodeGPUTest skipped: #{reason}")
      @moduletag skip: "no usable GPU: #{reason}"
  end

  @moduletag timeout: 180_000
  @tokens 16

  setup_all do
    peers = Peers.start_peers(2)
    nodes = Enum.map(peers, &elem(&1, 1))

    for {module, binary} <- :persistent_term.get({EmilyTest.TPDecodeRanks, :modules}),
        do: Peers.load_module({:module, module, binary, nil}, nodes)

    on_exit(fn -> Peers.stop_peers(peers) end)
    %{nodes: nodes, cpu: Ranks.generate(nil, @tokens)}
  end

  defp run(nodes, opts),
    do:
      Peers.on_all(
        nodes,
        &:erpc.call(&1, Ranks, :tensor_parallel, [nodes, @tokens, opts], 120_000),
        150_000
      )

  # Both ranks agree bit for bit; against the CPU the tokens are the same
  # and the logits within float rounding (GPU reductions sum in another
  # order).
  defp check(ranks, cpu) do
    [r0, r1] = ranks
    assert r0.tokens == r1.tokens
    assert r0.logits == r1.logits
    assert r0.tokens == cpu.tokens

    for {a, b} <- Enum.zip(cpu.logits, r0.logits),
        do: assert(Ranks.max_difference(a, b) < 1.0e-3)
  end

  test "2 ranks on one GPU over TCP generate the CPU's tokens", %{nodes: nodes, cpu: cpu} do
    nodes |> run(devices: [{:gpu, 0}, {:gpu, 0}]) |> check(cpu)
  end

  test "2 ranks on 2 GPUs over NCCL generate the CPU's tokens", %{nodes: nodes, cpu: cpu} do
    cond do
      Emily.Device.available({:gpu, 1}) != :ok ->
        IO.puts("NCCL tensor-parallel decode skipped: one GPU (needs gpu:0 and gpu:1)")

      match?({:error, _}, nccl_check()) ->
        {:error, message} = nccl_check()
        IO.puts("NCCL tensor-parallel decode skipped: #{message}")

      true ->
        nodes |> run(transport: :nccl, devices: [{:gpu, 0}, {:gpu, 1}]) |> check(cpu)
    end
  end

  # Whether libnccl.so.2 can be opened (a one-rank communicator).
  defp nccl_check do
    comm =
      Emily.Distributed.init([node()], transport: :nccl, device: {:gpu, 0}, name: :nccl_probe)

    Emily.Distributed.close(comm)
    :ok
  rescue
    e in RuntimeError ->
      if e.message =~ "NCCL is not available",
        do: {:error, e.message},
        else: reraise(e, __STACKTRACE__)
  end
end
