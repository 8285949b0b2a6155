defmodule Emily.Tensor.SigilsTest do
  use ExUnit.Case, async: true

  alias Emily.Tensor, as: T
  import Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]

  doctest Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]
  doctest Emily.Tensor.Sigils

  test "~MAT and ~VEC build what tensor/2 builds, for every type modifier" do
    assert T.to_binary(sigil_VEC("1 2 3", "u8")) == T.to_binary(T.tensor([1, 2, 3], type: :u8))
    assert T.to_binary(sigil_VEC("-1 2 3", "s8")) == T.to_binary(T.tensor([-1, 2, 3], type: :s8))
    assert T.type(sigil_VEC("1", "u16")) == {:u, 16}
    assert T.type(sigil_VEC("1", "u32")) == {:u, 32}
    assert T.type(sigil_VEC("1", "u64")) == {:u, 64}
    assert T.type(sigil_VEC("1", "s16")) == {:s, 16}
    assert T.type(sigil_VEC("1", "s32")) == {:s, 32}
    assert T.type(sigil_VEC("1", "s64")) == {:s, 64}
    assert T.type(sigil_VEC("1", "f16")) == {:f, 16}
    assert T.type(sigil_VEC("1", "bf16")) == {:bf, 16}
    assert T.type(sigil_VEC("1", "f32")) == {:f, 32}
    assert T.type(sigil_VEC("1", "f64")) == {:f, 64}
    assert T.type(sigil_VEC("1", "c64")) == {:c, 64}
    assert T.type(sigil_VEC("1", "c128")) == {:c, 128}

    m = sigil_MAT("\n      0.25  -1.5e2\n      3     4\n    ", "f64")

    assert T.to_binary(m) == T.to_binary(T.tensor([[0.25, -150.0], [3, 4]], type: :f64))
    # Without a modifier the type is inferred as tensor/2 infers it.
    assert T.type(sigil_VEC("1 2", "")) == {:s, 32}
    assert T.type(sigil_VEC("1 2.0", "")) == {:f, 32}
    assert T.type(sigil_VEC("1 2i", "")) == {:c, 64}
    assert T.shape(sigil_MAT("1 2 3", "")) == {1, 3}
  end

  test "special values and complex numbers" do
    assert T.to_list(sigil_VEC("inf -inf NaN +Inf nan", "f64")) ==
             [:infinity, :neg_infinity, :nan, :infinity, :nan]

    assert T.to_list(sigil_VEC("1+2i 3-4.5i -2i i +i -i 1e1+1e-1i", "c128")) ==
             [
               Emily.Complex.new(1.0, 2.0),
               Emily.Complex.new(3.0, -4.5),
               Emily.Complex.new(0.0, -2.0),
               Emily.Complex.new(0.0, 1.0),
               Emily.Complex.new(0.0, 1.0),
               Emily.Complex.new(0.0, -1.0),
               Emily.Complex.new(10.0, 0.1)
             ]
  end

  test "bad text fails at compile time with an ArgumentError" do
    bad = [
      {~S|sigil_VEC("1 x 3", "")|, ~r/~VEC: cannot parse "x" as a number/},
      {~S|sigil_VEC("1 2\n3 4", "")|, ~r/~VEC expects one row/},
      {~S|sigil_MAT("", "")|, ~r/~MAT expects at least one number/},
      {~S|sigil_MAT("1 2", "f8")|, ~r/unknown type modifier "f8"/},
      {~S|sigil_VEC("1.", "")|, ~r/cannot parse "1\." as a number/},
      {~S|sigil_MAT("1 2\n3", "")|, ~r/lists have different shapes/},
      {~S|x = "1"; sigil_VEC(x, "")|, ~r/~VEC expects literal text/},
      {~S|m = "u8"; sigil_VEC("1", m)|, ~r/~VEC expects literal modifiers, got: m/}
    ]

    for {code, message} <- bad do
      assert_raise ArgumentError, message, fn ->
        Code.eval_string("import Emily.Tensor, only: [sigil_MAT: 2, sigil_VEC: 2]; " <> code)
      end
    end
  end
end
