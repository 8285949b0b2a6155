defmodule Emily.Backend.IndexingTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  test "gather/take match numpy on random data, every index type" do
    data = for i <- 0..59, do: :math.sin(i) * 10
    t = Nx.tensor(data, type: :f64) |> Nx.reshape({3, 4, 5})
    idx_values = [[2, 3], [0, 0], [1, 4], [2, 1]]

    for type <- [:u8, :s8, :u32, :s64] do
      idx = Nx.tensor(idx_values, type: type)
      got = Nx.gather(t, idx, axes: [0, 2]) |> Nx.to_flat_list()

      %{"y" => {{4, 4}, want}} =
        EmilyTest.Numpy.run(
          "out['y'] = np.stack([x[i, :, j] for i, j in [(2, 3), (0, 0), (1, 4), (2, 1)]])",
          x: {data, {3, 4, 5}}
        )

      assert got == want
    end

    strided = Nx.transpose(t, axes: [2, 0, 1])
    got = Nx.take(strided, Nx.tensor([4, 0]), axis: 0) |> Nx.to_flat_list()

    %{"y" => {_, want}} =
      EmilyTest.Numpy.run("out['y'] = np.take(x.transpose(2, 0, 1), [4, 0], axis=0)",
        x: {data, {3, 4, 5}}
      )

    assert got == want
  end

  test "indexed_add accumulates duplicates and merges types" do
    t = Nx.tensor([1, 2, 3], type: :u8)
    out = Nx.indexed_add(t, Nx.tensor([[0], [0], [2]]), Nx.tensor([1.5, 1.5, 1.0]))
    assert Nx.type(out) == {:f, 32}
    assert Nx.to_list(out) == [4.0, 2.0, 4.0]
    assert Nx.to_list(Nx.indexed_put(t, Nx.tensor([1]), Nx.tensor(9))) == [1, 9, 3]
  end

  test "top_k on the last axis, NaN first" do
    {v, i} = Nx.top_k(Nx.tensor([[1.0, :nan, 3.0], [2.0, 5.0, 4.0]]), k: 2)
    assert Nx.to_list(v) == [[:nan, 3.0], [5.0, 4.0]]
    assert Nx.to_list(i) == [[1, 2], [1, 2]]
    assert Nx.type(i) == {:s, 32}
  end
end
