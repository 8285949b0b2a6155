defmodule Emily.Tensor.AccessTest do
  use ExUnit.Case, async: true
  doctest Emily.Tensor.Access

  alias Emily.Tensor, as: T

  setup do
    {:ok, t: T.iota({3, 4})}
  end

  test "integers drop axes, negative counts from the end", %{t: t} do
    assert T.to_list(t[0]) == [0, 1, 2, 3]
    assert T.to_number(t[[2, -1]]) == 11
    assert T.shape(t[[1, 2]]) == {}
  end

  test "ranges keep axes, with steps and negative ends", %{t: t} do
    assert T.to_list(t[1..2]) == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert T.to_list(t[[.., 0..-1//2]]) == [[0, 2], [4, 6], [8, 10]]
    assert T.to_list(t[[-1..-1, 1]]) == [9]
  end

  test "scalar tensors index with clamping; integer tensors take", %{t: t} do
    assert T.to_list(t[T.tensor(1)]) == [4, 5, 6, 7]
    assert T.to_list(t[T.tensor(9)]) == [8, 9, 10, 11]
    assert T.to_list(t[T.tensor([2, 0])]) == [[8, 9, 10, 11], [0, 1, 2, 3]]
    assert T.to_list(t[[.., T.tensor(3)]]) == [3, 7, 11]
  end

  test "bad indices raise ArgumentError naming the axis", %{t: t} do
    assert_raise ArgumentError, ~r/index 3 is out of bounds for axis 0 with size 3/, fn -> t[3] end
    assert_raise ArgumentError, ~r/out of bounds for axis 1/, fn -> t[[0, 1..9]] end
    assert_raise ArgumentError, ~r/too many indices \(3\) for tensor of rank 2/, fn -> t[[0, 0, 0]] end
    assert_raise ArgumentError, ~r/invalid index :a for axis 0/, fn -> t[:a] end
    assert_raise ArgumentError, ~r/integer scalar tensor/, fn -> t[[T.tensor(1.0)]] end
    assert_raise ArgumentError, ~r/immutable/, fn -> put_in(t[0], 1) end
  end
end
