defmodule Emily.ServingTest do
  # Emily.Serving on one node: what portable/1 copies and what it leaves,
  # the postprocessing distributed/1 installs, batched_run/3's options. The
  # distributed behaviour itself is test/emily/serving/distributed_test.exs.
  use ExUnit.Case, async: true

  doctest Emily.Serving

  import Nx.Defn

  defn(double(x), do: x * 2)

  defp emily(data), do: Nx.tensor(data, backend: Emily.Backend)
  defp binary?(%Nx.Tensor{data: data}), do: match?(%Nx.BinaryBackend{}, data)

  test "portable/1 copies Emily tensors inside lists, maps, tuples and containers" do
    term = %{
      list: [emily([1, 2]), %{inner: {emily([3.5]), "text"}}],
      lazy: Nx.add(emily([1.0]), 1),
      binary: Nx.tensor([9]),
      complex: emily([Complex.new(1.0, -2.0)]),
      other: {:ok, 1..3, "text"}
    }

    out = Emily.Serving.portable(term)

    assert [a, %{inner: {b, "text"}}] = out.list
    assert binary?(a) and Nx.to_list(a) == [1, 2]
    assert binary?(b) and Nx.to_list(b) == [3.5]
    assert binary?(out.lazy) and Nx.to_list(out.lazy) == [2.0]
    assert binary?(out.complex) and Nx.to_list(out.complex) == [Complex.new(1.0, -2.0)]
    assert Nx.type(out.complex) == {:c, 64}
    # Tensors of other backends and other terms are returned as they are.
    assert out.binary == term.binary
    assert out.other == {:ok, 1..3, "text"}
  end

  test "portable/1 keeps structs it does not know as they are" do
    stream = Stream.map([emily([1])], & &1)
    assert Emily.Serving.portable(stream) == stream
    assert Emily.Serving.portable(%URI{host: "x"}) == %URI{host: "x"}
  end

  test "portable/1 on an Nx.Batch: copies the entries, keeps size, padding and key" do
    batch =
      Nx.Batch.concatenate([emily([[1.0, 2.0], [3.0, 4.0]])])
      |> Nx.Batch.merge(Nx.Batch.stack([emily([5.0, 6.0])]))
      |> Nx.Batch.pad(1)
      |> Nx.Batch.key(:k)

    out = Emily.Serving.portable(batch)
    assert {out.size, out.pad, out.key} == {3, 1, :k}

    for {thunks, _size} <- out.stack, thunk <- thunks do
      assert binary?(thunk.())
      # Nx's own thunk: a node without Emily can still evaluate the batch.
      {:module, module} = Function.info(thunk, :module)
      refute module == Emily.Serving
    end

    want = Nx.Defn.jit_apply(&Function.identity/1, [batch])
    got = Nx.Defn.jit_apply(&Function.identity/1, [out])
    assert Nx.to_list(got) == Nx.to_list(want)
    assert Nx.to_list(got) == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [0.0, 0.0]]
  end

  test "distributed/1 runs the serving's own distributed postprocessing, then portable/1" do
    serving =
      Nx.Serving.jit(&double/1, compiler: Emily.Compiler)
      |> Nx.Serving.distributed_postprocessing(&{:previous, &1})
      |> Emily.Serving.distributed()

    assert {:previous, t} = serving.distributed_postprocessing.(emily([1.0]))
    assert binary?(t) and Nx.to_list(t) == [1.0]
  end

  test "distributed/1 on a streaming serving makes each event portable" do
    serving =
      Nx.Serving.jit(&double/1, compiler: Emily.Compiler)
      |> Nx.Serving.streaming()
      |> Emily.Serving.distributed()

    events = [{:batch, emily([1.0]), :meta}, {:batch, emily([2.0]), :meta}]
    out = Enum.to_list(serving.distributed_postprocessing.(events))

    assert [{:batch, a, :meta}, {:batch, b, :meta}] = out
    assert binary?(a) and binary?(b)
    assert Nx.to_list(b) == [2.0]
  end

  test "batched_run/3 on a local serving: as Nx.Serving.batched_run/2" do
    name = :"emily_serving_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Nx.Serving,
       serving: Nx.Serving.jit(&double/1, compiler: Emily.Compiler), name: name, batch_size: 2}
    )

    result = Emily.Serving.batched_run(name, Nx.Batch.stack([emily([1.0, 2.0])]), retries: 1)
    assert Nx.to_list(result) == [[2.0, 4.0]]

    assert_raise ArgumentError, ~r/unknown keys \[:retry\]/, fn ->
      Emily.Serving.batched_run(name, Nx.Batch.stack([emily([1.0])]), retry: 1)
    end
  end
end
