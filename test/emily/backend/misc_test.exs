defmodule Emily.Backend.MiscTest do
  # Small fixes that came with the Nx leftovers (issue #4).
  use ExUnit.Case, async: true

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  test "Emily.to_binary names itself on a bad argument" do
    assert_raise ArgumentError,
                 ~r/^to_binary: argument tensor must be an Emily array reference, got: foo/,
                 fn ->
                   Emily.to_binary(:foo)
                 end

    assert_raise ArgumentError, ~r/^to_binary: argument tensor must be/, fn ->
      Emily.to_binary(make_ref())
    end
  end

  test "argmax/argmin accept every integer index type, u8 included" do
    t = Nx.tensor([[3, 9, 1], [7, 2, 8]])

    for type <- [:u8, {:u, 8}, :u16, :u32, :u64, :s8, :s16, :s32, :s64] do
      expected = Nx.Type.normalize!(type)
      max = Nx.argmax(t, type: type)
      assert {max.type, Nx.to_number(max)} == {expected, 1}

      min = Nx.argmin(t, axis: 1, type: type, keep_axis: true)
      assert {min.type, min.shape, Nx.to_list(min)} == {expected, {2, 1}, [[2], [1]]}
      assert Nx.to_list(Nx.argmax(t, axis: 0, type: type, tie_break: :high)) == [1, 0, 1]
    end

    assert_raise ArgumentError, ~r/integer/, fn -> Nx.argmax(t, type: :f32) end

    assert_raise ArgumentError, ~r/invalid numerical type/, fn ->
      Nx.argmax(t, type: {:pred, 8})
    end

    # 300 indices do not fit in u8: the engine says so rather than wrapping.
    assert_raise ArgumentError, ~r/do not fit in u8/, fn ->
      Nx.argmax(Nx.iota({300}), type: :u8)
    end
  end
end
