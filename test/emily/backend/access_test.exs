defmodule Emily.Backend.AccessTest do
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  setup do
    {:ok, t: Nx.iota({3, 4})}
  end

  test "integers drop axes, negative counts from the end", %{t: t} do
    assert Nx.to_list(t[0]) == [0, 1, 2, 3]
    assert Nx.to_number(t[[2, -1]]) == 11
    assert Nx.shape(t[[1, 2]]) == {}
  end

  test "ranges keep axes, with steps and negative ends", %{t: t} do
    assert Nx.to_list(t[1..2]) == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert Nx.to_list(t[[.., 0..-1//2]]) == [[0, 2], [4, 6], [8, 10]]
    assert Nx.to_list(t[[-1..-1, 1]]) == [9]
  end

  test "scalar tensors index with clamping; integer tensors take", %{t: t} do
    assert Nx.to_list(t[Nx.tensor(1)]) == [4, 5, 6, 7]
    assert Nx.to_list(t[Nx.tensor(9)]) == [8, 9, 10, 11]
    assert Nx.to_list(t[Nx.tensor([2, 0])]) == [[8, 9, 10, 11], [0, 1, 2, 3]]
    assert Nx.to_list(t[[.., Nx.tensor(3)]]) == [3, 7, 11]
  end
end
