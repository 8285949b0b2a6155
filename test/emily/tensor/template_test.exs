defmodule Emily.Tensor.TemplateTest do
  use ExUnit.Case, async: true

  alias Emily.Tensor, as: T

  doctest Emily.Tensor.Template

  @template_error ~r/is a template tensor \(a shape and a type without data\): a template cannot be computed with or read/

  describe "template/3 and to_template/1" do
    test "templates carry shape and type, every metadata function works" do
      for type <- [:u8, :s64, :f16, :bf16, :f64, :c128] do
        t = T.template({2, 0, 3}, type)
        assert T.shape(t) == {2, 0, 3}
        assert T.type(t) == T.Type.normalize!(type)
        assert T.rank(t) == 3
        assert T.size(t) == 0
        assert T.axes(t) == [0, 1, 2]
      end

      t = T.template({4, 5}, {:f, 32})
      assert T.byte_size(t) == 80
      assert T.axis_size(t, -1) == 5
      assert T.compatible?(t, T.iota({4, 5}, type: :f32))
    end

    test "computing with a template or reading it raises a clear ArgumentError" do
      t = T.template({2, 2}, :f32)
      real = T.iota({2, 2}, type: :f32)

      uses = [
        fn -> T.to_binary(t) end,
        fn -> T.to_list(t) end,
        fn -> T.to_number(T.template({}, :f32)) end,
        fn -> T.add(t, real) end,
        fn -> T.add(real, t) end,
        fn -> T.exp(t) end,
        fn -> T.sum(t) end,
        fn -> T.dot(real, t) end,
        fn -> T.reshape(t, {4}) end,
        fn -> T.transpose(t) end,
        fn -> T.concatenate([real, t]) end,
        fn -> T.stack([t, real]) end,
        fn -> T.as_type(t, :f64) end,
        fn -> T.slice(t, [0, 0], [1, 1]) end,
        fn -> Emily.eval(t.ref) end
      ]

      for use <- uses do
        assert_raise ArgumentError, @template_error, use
      end

      assert_raise ArgumentError, ~r/^to_binary: argument tensor is a template tensor/, fn ->
        Emily.to_binary(t.ref)
      end
    end

    test "prints without data, like Nx's template backend" do
      assert inspect(T.template({}, :s32)) == "#Emily.Tensor<\n  s32\n  template (no data)\n>"

      assert inspect(T.template({2, 3}, :bf16)) ==
               "#Emily.Tensor<\n  bf16[2][3]\n  template (no data)\n>"
    end

    test "bad shapes, types and names raise" do
      assert_raise ArgumentError, ~r/expects a shape/, fn -> T.template([2], :f32) end
      assert_raise ArgumentError, ~r/expects a shape/, fn -> T.template({-1}, :f32) end
      assert_raise ArgumentError, fn -> T.template({2}, :f12) end
      assert_raise ArgumentError, ~r/no named axes/, fn -> T.template({2}, :f32, names: [:x]) end
      assert T.shape(T.template({2}, :f32, names: [nil])) == {2}
      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.template({2}, :f32, backend: nil) end
    end

    test "to_template keeps the structure of containers" do
      a = T.iota({2}, type: :u16)
      tmpl = T.to_template(%{a: a, rest: {1, 2.0, Emily.Complex.new(1, 1)}})

      assert %{a: ta, rest: {t1, t2, t3}} = tmpl
      assert {ta.shape, ta.type, ta.ref} == {{2}, {:u, 16}, :template}
      assert Enum.map([t1, t2, t3], & &1.type) == [{:s, 32}, {:f, 32}, {:c, 64}]
      assert T.to_template(T.to_template(a)) == T.to_template(a)
      assert_raise ArgumentError, ~r/to_template expects/, fn -> T.to_template([a]) end
    end
  end

  describe "donatable/1" do
    test "marks a tensor; results of ops are not marked" do
      t = T.donatable(T.tensor([1, 2]))
      assert T.donatable?(t)
      refute T.donatable?(T.add(t, 1))
      refute T.donatable?(T.tensor(1))
      refute T.donatable?(3)
      assert T.donatable?(T.donatable(3))
      assert T.to_list(T.add(t, 1)) == [2, 3]
      assert inspect(T.donatable(T.template({1}, :u8))) =~ "u8[1] [donatable]\n  template"
    end
  end

  describe "runtime_call/3..4" do
    test "calls the function with the values and checks containers of outputs" do
      x = T.tensor([1.0, 2.0, 3.0])
      out = {T.template({3}, :f32), %{n: T.template({}, :s32)}}

      {a, %{n: n}} =
        T.runtime_call(out, {x, 2}, :static, fn {t, k}, :static ->
          {T.multiply(t, k), %{n: T.tensor(k)}}
        end)

      assert T.to_list(a) == [2.0, 4.0, 6.0]
      assert T.to_number(n) == 2

      # Any tensor (not only a template) describes the output; so does a number.
      assert T.to_number(T.runtime_call(1, x, fn t -> T.tensor(T.size(t)) end)) == 3
    end

    test "a result that does not match the template raises RuntimeError" do
      x = T.tensor([1, 2])

      mismatches = [
        {T.template({2}, :f32), fn t -> t end},
        {T.template({3}, :s32), fn t -> t end},
        {{T.template({2}, :s32)}, fn t -> t end},
        {{x, x}, fn t -> {t} end},
        {%{a: x}, fn t -> %{b: t} end},
        {x, fn _ -> :not_a_tensor end}
      ]

      for {out, fun} <- mismatches do
        assert_raise RuntimeError, ~r/runtime_call: expected the function to match/, fn ->
          T.runtime_call(out, x, fun)
        end
      end

      assert_raise RuntimeError, ~r/template \{s32\[2\]\}, got: s32\[2\]/, fn ->
        T.runtime_call({x}, x, fn t -> t end)
      end
    end

    test "wrong function arities raise ArgumentError" do
      assert_raise ArgumentError, ~r/function of 1 argument/, fn ->
        T.runtime_call(1, 1, fn -> 1 end)
      end

      assert_raise ArgumentError, ~r/function of 2 arguments/, fn ->
        T.runtime_call(1, 1, [], fn x -> x end)
      end
    end
  end

  describe "io_call/2..3" do
    test "runs the function for its side effect and passes the data through" do
      data = {T.tensor([1, 2]), %{b: T.tensor(3.0)}}
      assert T.io_call(data, fn d -> send(self(), {:one, d}) end) === data
      assert_received {:one, ^data}
      assert T.io_call(data, :named, fn d -> send(self(), {:two, d}) end) === data
      assert_received {:two, ^data}
      assert T.io_call(data, :no_function) === data
    end

    test "bad names and functions raise" do
      assert_raise ArgumentError, ~r/io_call\/2 expects/, fn -> T.io_call(1, "name") end
      assert_raise ArgumentError, ~r/io_call\/3 expects/, fn -> T.io_call(1, :n, fn -> :x end) end

      assert_raise ArgumentError, ~r/io_call\/3 expects/, fn ->
        T.io_call(1, "n", fn x -> x end)
      end
    end
  end

  describe "block/4" do
    test "runs the default implementation with the struct and arguments" do
      a = T.tensor([[1, 2], [3, 4]])
      b = T.tensor([[1, 0], [0, 1]])

      result =
        T.block(%{scale: 10}, [a, b], T.template({2, 2}, :s32), fn block, x, y ->
          x |> T.dot(y) |> T.multiply(block.scale)
        end)

      assert T.to_list(result) == [[10, 20], [30, 40]]

      assert_raise RuntimeError, ~r/block: expected the function to match/, fn ->
        T.block(:blk, [a], T.template({2}, :s32), fn :blk, x -> x end)
      end

      assert_raise ArgumentError, ~r/block\/4 expects a list/, fn ->
        T.block(:blk, [a], a, fn x -> x end)
      end

      assert_raise ArgumentError, ~r/block\/4 expects a list/, fn ->
        T.block(:blk, a, a, fn _, x -> x end)
      end
    end
  end
end
