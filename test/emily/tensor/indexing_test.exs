defmodule Emily.Tensor.IndexingTest do
  use ExUnit.Case, async: true
  doctest Emily.Tensor.Indexing

  alias Emily.Tensor, as: T

  test "gather/take match numpy on random data, every index type" do
    data = for i <- 0..59, do: :math.sin(i) * 10
    t = T.tensor(data, type: :f64) |> T.reshape({3, 4, 5})
    idx_values = [[2, 3], [0, 0], [1, 4], [2, 1]]

    for type <- [:u8, :s8, :u32, :s64] do
      idx = T.tensor(idx_values, type: type)
      got = T.gather(t, idx, axes: [0, 2]) |> T.to_flat_list()

      %{"y" => {{4, 4}, want}} =
        EmilyTest.Numpy.run(
          "out['y'] = np.stack([x[i, :, j] for i, j in [(2, 3), (0, 0), (1, 4), (2, 1)]])",
          x: {data, {3, 4, 5}}
        )

      assert got == want
    end

    strided = T.transpose(t, axes: [2, 0, 1])
    got = T.take(strided, T.tensor([4, 0]), axis: 0) |> T.to_flat_list()

    %{"y" => {_, want}} =
      EmilyTest.Numpy.run("out['y'] = np.take(x.transpose(2, 0, 1), [4, 0], axis=0)", x: {data, {3, 4, 5}})

    assert got == want
  end

  test "indexed_add accumulates duplicates and merges types" do
    t = T.tensor([1, 2, 3], type: :u8)
    out = T.indexed_add(t, T.tensor([[0], [0], [2]]), T.tensor([1.5, 1.5, 1.0]))
    assert T.type(out) == {:f, 32}
    assert T.to_list(out) == [4.0, 2.0, 4.0]
    assert T.to_list(T.indexed_put(t, T.tensor([1]), T.tensor(9))) == [1, 9, 3]
  end

  test "top_k on the last axis, NaN first" do
    {v, i} = T.top_k(T.tensor([[1.0, :nan, 3.0], [2.0, 5.0, 4.0]]), k: 2)
    assert T.to_list(v) == [[:nan, 3.0], [5.0, 4.0]]
    assert T.to_list(i) == [[1, 2], [1, 2]]
    assert T.type(i) == {:s, 32}
  end

  test "errors name the op" do
    t = T.iota({2, 3})
    assert_raise ArgumentError, ~r/gather: indices must be an integer tensor, got f32/, fn -> T.gather(t, T.tensor([[0.0]])) end
    assert_raise ArgumentError, ~r/gather: indices address 3 axes but the tensor has rank 2/, fn -> T.gather(t, T.tensor([[0, 0, 0]])) end
    assert_raise ArgumentError, ~r/take_along_axis: indices must have the tensor's rank 2/, fn -> T.take_along_axis(t, T.tensor([0])) end
    assert_raise ArgumentError, ~r/indexed_add: indices must have shape/, fn -> T.indexed_add(t, T.tensor([[[0]]]), T.tensor([1])) end
    assert_raise ArgumentError, ~r/top_k: :k must be an integer in 1..3/, fn -> T.top_k(t, k: 4) end
    assert_raise ArgumentError, ~r/unknown keys \[:axs\]/, fn -> T.take(t, T.tensor([0]), axs: 1) end
  end
end
