defmodule Emily.Tensor.LinAlgTest do
  use ExUnit.Case, async: true

  alias Emily.Tensor, as: T
  alias Emily.Tensor.LinAlg
  alias EmilyTest.Numpy

  doctest Emily.Tensor.LinAlg

  defp t(list, opts \\ []), do: T.tensor(list, opts)

  defp flat(%T{} = x), do: x |> T.reshape({T.size(x)}) |> T.to_list() |> Enum.map(&re/1)
  defp re(%Emily.Complex{re: r}), do: r
  defp re(x), do: x

  defp assert_all_close(got, want, tol) do
    g = if is_list(got), do: got, else: flat(got)
    w = if is_list(want), do: want, else: flat(want)
    assert length(g) == length(w)
    scale = Enum.reduce(w, 1.0, &max(abs(&1), &2))

    Enum.zip(g, w)
    |> Enum.each(fn {a, b} -> assert abs(a - b) <= tol * scale, "#{inspect(g)}\nvs\n#{inspect(w)}" end)
  end

  defp rand(n, seed) do
    :rand.seed(:exsss, {seed, 3, 5})
    for _ <- 1..n, do: :rand.normal()
  end

  defp mat(vals, shape, type), do: vals |> t(type: type) |> T.reshape(shape)

  defp mm(a, b), do: Emily.Tensor.Core.wrap(Emily.matmul(a.ref, b.ref))

  describe "Nx's documented examples" do
    test "cholesky" do
      assert_all_close(LinAlg.cholesky(t([[[2.0, 3.0], [3.0, 5.0]], [[1.0, 0.0], [0.0, 1.0]]])),
                       [1.4142135381698608, 0.0, 2.1213204860687256, 0.7071064710617065, 1.0, 0.0, 0.0, 1.0], 1.0e-6)

      l =
        LinAlg.cholesky(
          t([[6.0, 3.0, 4.0, 8.0], [3.0, 6.0, 5.0, 1.0], [4.0, 5.0, 10.0, 7.0], [8.0, 1.0, 7.0, 25.0]])
        )

      assert_all_close(l, [2.4494898319244385, 0.0, 0.0, 0.0, 1.2247447967529297, 2.1213202476501465, 0.0,
                           0.0, 1.6329931020736694, 1.41421377658844, 2.309401035308838, 0.0,
                           3.265986204147339, -1.4142134189605713, 1.5877134799957275, 3.132491111755371], 1.0e-6)

      c = LinAlg.cholesky(t([[1.0, Emily.Complex.new(0, -2)], [Emily.Complex.new(0, 2), 5.0]]))
      assert inspect(c) == "#Emily.Tensor<\n  c64[2][2]\n  [\n    [1.0+0.0i, 0.0+0.0i],\n    [0.0+2.0i, 1.0+0.0i]\n  ]\n>"
    end

    test "triangular_solve" do
      a = t([[1, 0, 0], [1, 1, 0], [1, 1, 1]], type: :f64)
      assert T.to_list(LinAlg.triangular_solve(a, t([1, 2, 1]))) == [1.0, 1.0, -1.0]
      assert LinAlg.triangular_solve(a, t([1, 2, 1])).type == {:f, 64}

      a = t([[1, 0, 0], [1, 1, 0], [0, 1, 1]])
      b = t([[1, 2, 3], [2, 2, 4], [2, 0, 1]])
      assert T.to_list(LinAlg.triangular_solve(a, b)) == [[1.0, 2.0, 3.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]]

      a = t([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 2], [0, 0, 0, 3]])
      assert_all_close(LinAlg.triangular_solve(a, t([2, 4, 2, 4]), lower: false),
                       [-1.3333333730697632, 2.6666667461395264, -0.6666666865348816, 1.3333333730697632], 1.0e-6)

      a = t([[1, 0, 0], [1, 1, 0], [1, 2, 1]])
      b = t([[0, 2, 1], [1, 1, 0], [3, 3, 1]])
      assert T.to_list(LinAlg.triangular_solve(a, b, left_side: false)) ==
               [[-1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]

      a = t([[1, 1, 1], [0, 1, 1], [0, 0, 1]], type: :f64)
      assert T.to_list(LinAlg.triangular_solve(a, t([1, 2, 1]), transform_a: :transpose, lower: false)) ==
               [1.0, 1.0, -1.0]

      a = t([[1, 0, 0], [1, 1, 0], [1, 2, 1]])
      assert T.to_list(LinAlg.triangular_solve(a, t([[0, 1, 3], [2, 1, 3]]), left_side: false)) ==
               [[2.0, -5.0, 3.0], [4.0, -5.0, 3.0]]

      assert T.to_list(LinAlg.triangular_solve(a, t([[0, 2], [3, 0], [0, 0]]), left_side: true)) ==
               [[0.0, 2.0], [3.0, -2.0], [-6.0, 2.0]]

      a = t([[1, 0, 0], [1, Emily.Complex.new(0, 1), 0], [Emily.Complex.new(0, 1), 1, 1]])
      x = LinAlg.triangular_solve(a, t([1, -1, Emily.Complex.new(3, 3)]))
      assert inspect(x) == "#Emily.Tensor<\n  c64[3]\n  [1.0+0.0i, 0.0+2.0i, 3.0+0.0i]\n>"

      a = t([[[1, 0], [2, 3]], [[4, 0], [5, 6]]])
      assert_all_close(LinAlg.triangular_solve(a, t([[2, -1], [3, 7]])),
                       [2.0, -1.6666666269302368, 0.75, 0.5416666865348816], 1.0e-6)
    end

    test "triangular_solve errors" do
      assert_raise ArgumentError, ~r/expected a square matrix or a batch of square matrices, got tensor with shape: \{2, 4\}/, fn ->
        LinAlg.triangular_solve(t([[3, 0, 0, 0], [2, 1, 0, 0]]), t([4, 2, 4, 2]))
      end

      assert_raise ArgumentError, "incompatible dimensions for a and b on triangular solve", fn ->
        LinAlg.triangular_solve(t([[3, 0, 0, 0], [2, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]), t([4]))
      end

      x = LinAlg.triangular_solve(t([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]), t([4, 2, 4, 2]))
      assert_raise ArgumentError, ~r/can't solve for singular matrix/, fn -> T.to_list(x) end

      a = t([[1, 0, 0], [1, 1, 0], [1, 1, 1]], type: :f64)
      assert_raise ArgumentError, "complex numbers not supported yet", fn ->
        LinAlg.triangular_solve(a, t([1, 2, 1]), transform_a: :conjugate)
      end

      assert_raise ArgumentError, ~r/invalid value for :transform_a option, expected :none, :transpose, or :conjugate, got: :other/, fn ->
        LinAlg.triangular_solve(a, t([1, 2, 1]), transform_a: :other)
      end

      assert_raise ArgumentError, ~r/unknown keys/, fn -> LinAlg.triangular_solve(a, t([1, 2, 1]), foo: 1) end
    end

    test "solve" do
      a = t([[1, 0, 1], [1, 1, 0], [1, 1, 1]], type: :f64)
      assert inspect(T.round(LinAlg.solve(a, t([0, 2, 1])))) == "#Emily.Tensor<\n  f64[3]\n  [1.0, 1.0, -1.0]\n>"

      a = t([[1, 0, 1], [1, 1, 0], [0, 1, 1]])
      b = t([[2, 2, 3], [2, 2, 4], [2, 0, 1]])
      assert T.to_list(T.round(LinAlg.solve(a, b))) == [[1.0, 2.0, 3.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]]

      a = t([[[14, 10], [9, 9]], [[4, 11], [2, 3]]])
      b = t([[[2, 4], [3, 2]], [[1, 5], [-3, -1]]])
      assert T.to_list(T.round(LinAlg.solve(a, b))) == [[[0.0, 0.0], [1.0, 0.0]], [[-4.0, -3.0], [1.0, 1.0]]]

      assert_raise ArgumentError, "`b` tensor has incompatible dimensions, expected {2, 2} or {2}, got: {4}", fn ->
        LinAlg.solve(t([[1, 0], [0, 1]]), t([4, 2, 4, 2]))
      end

      assert_raise ArgumentError,
                   "`a` tensor has incompatible dimensions, expected a square matrix or a batch of square matrices, got: {3, 4}",
                   fn -> LinAlg.solve(t([[3, 0, 0, 0], [2, 1, 0, 0], [1, 1, 1, 1]]), t([4])) end

      x = LinAlg.solve(t([[1.0, 2.0], [2.0, 4.0]]), t([1.0, 1.0]))
      assert_raise ArgumentError, ~r/can't solve for singular matrix/, fn -> T.to_list(x) end
    end

    test "invert" do
      a = t([[[1, 2], [0, 1]], [[1, 1], [0, 1]]])
      assert T.to_list(LinAlg.invert(a)) == [[[1.0, -2.0], [0.0, 1.0]], [[1.0, -1.0], [0.0, 1.0]]]

      sing = LinAlg.invert(t([[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]))
      assert inspect(sing) =~ "[NaN, NaN, NaN, NaN]"

      assert_raise ArgumentError,
                   "invert/1 expects a square matrix or a batch of square matrices, got tensor with shape: {2, 4}",
                   fn -> LinAlg.invert(t([[3, 0, 0, 0], [2, 1, 0, 0]])) end
    end

    test "qr" do
      {q, r} = LinAlg.qr(t([[-3, 2, 1], [0, 1, 1], [0, 0, -1]]))
      assert T.to_list(q) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
      assert T.to_list(r) == [[-3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, -1.0]]

      {qs, rs} = LinAlg.qr(t([[[-3, 2, 1], [0, 1, 1], [0, 0, -1]], [[3, 2, 1], [0, 1, 1], [0, 0, 1]]]))
      assert qs.shape == {2, 3, 3} and rs.shape == {2, 3, 3}
      assert T.to_list(rs) == [[[-3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, -1.0]], [[3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]]

      tt = t([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]], type: :f32)
      {q, r} = LinAlg.qr(tt, mode: :reduced)
      assert_all_close(q, [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.7071068286895752, 0.0, 0.0, 0.7071067094802856], 1.0e-6)
      assert_all_close(r, [3.0, 2.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.4142135381698608], 1.0e-6)

      {q, r} = LinAlg.qr(t([[3, 2, 1], [0, 1, 1], [0, 0, 1], [0, 0, 0]], type: :f32), mode: :complete)
      assert T.to_list(q) == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
      assert T.to_list(r) == [[3.0, 2.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]

      assert_raise ArgumentError, "tensor must have at least rank 2, got rank 1 with shape {5}", fn ->
        LinAlg.qr(t([1, 2, 3, 4, 5]))
      end

      assert_raise ArgumentError,
                   "invalid :mode received. Expected one of [:reduced, :complete], received: :error_test",
                   fn -> LinAlg.qr(t([[-3, 2, 1], [0, 1, 1], [0, 0, -1]]), mode: :error_test) end
    end

    test "pinv" do
      assert T.to_number(LinAlg.pinv(2)) == 0.5
      assert T.to_number(LinAlg.pinv(0)) == 0.0
      assert T.to_list(LinAlg.pinv(t([0, 0, 0]))) == [0.0, 0.0, 0.0]
      assert_all_close(LinAlg.pinv(t([[1, 1], [3, 4]])), [4.0, -1.0, -3.0, 1.0], 1.0e-5)
      assert_all_close(LinAlg.pinv(t([[0.5, 0], [0, 1], [0.5, 0]])), [1.0, 0.0, 1.0, 0.0, 1.0, 0.0], 1.0e-6)
      assert LinAlg.pinv(t([[0.5, 0], [0, 1], [0.5, 0]])).shape == {2, 3}
    end

    test "eigh" do
      {w, v} = LinAlg.eigh(t([[0, 1, 2], [1, 0, 2], [2, 2, 3]]))
      assert T.to_list(T.round(w)) == [-1.0, -1.0, 5.0]
      # the eigenvector of 5 (Nx's first column), up to sign
      col = v |> T.slice([0, 2], [3, 1]) |> flat() |> Enum.map(&abs/1)
      assert_all_close(col, [0.4082482904638631, 0.4082482904638631, 0.8164965809277261], 1.0e-5)

      {w, v} = LinAlg.eigh(t([[[2, 5], [5, 6]], [[1, 0], [0, 4]]]))
      assert T.to_list(T.round(w)) == [[-1.0, 9.0], [1.0, 4.0]]
      assert_all_close(T.abs(v), [0.8276740908622742, 0.5612090229988098, 0.5612090229988098, 0.8276740908622742, 1.0, 0.0, 0.0, 1.0], 1.0e-3)

      assert_raise ArgumentError, "tensor must be a square matrix or a batch of square matrices, got shape: {2, 3}", fn ->
        LinAlg.eigh(t([[1, 2, 3], [4, 5, 6]]))
      end
    end

    test "svd" do
      {u, s, vt} = LinAlg.svd(t([[1, 0, 0], [0, 1, 0], [0, 0, -1]]))
      assert T.to_list(s) == [1.0, 1.0, 1.0]
      assert T.to_list(T.abs(u)) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
      assert T.to_list(T.abs(vt)) == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]

      a = t([[2, 0, 0], [0, 3, 0], [0, 0, -1], [0, 0, 0]])
      {u, s, vt} = LinAlg.svd(a, full_matrices?: false)
      assert u.shape == {4, 3} and vt.shape == {3, 3}
      assert T.to_list(s) == [3.0, 2.0, 1.0]
      assert T.to_list(T.abs(u)) == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
      assert_all_close(mm(T.multiply(u, s), vt), T.as_type(a, :f32), 1.0e-6)

      assert_raise ArgumentError, ~r/not yet implemented for complex/, fn ->
        LinAlg.svd(t([[Emily.Complex.new(1, 1)]]))
      end
    end

    test "lu" do
      {p, l, u} = LinAlg.lu(t([[[9, 8, 7], [6, 5, 4], [3, 2, 1]], [[-1, 0, -1], [1, 0, 1], [1, 1, 1]]]))
      assert p.type == {:s, 32} and l.type == {:f, 32}
      # LAPACK pivots the first matrix differently from Nx (on the largest
      # entry); the second matches Nx's documented factors.
      assert T.to_list(p) |> Enum.at(1) == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
      assert_all_close(T.to_list(l) |> Enum.at(1) |> List.flatten(), [1.0, 0.0, 0.0, -1.0, 1.0, 0.0, -1.0, 0.0, 1.0], 1.0e-6)
      assert_all_close(T.to_list(u) |> Enum.at(1) |> List.flatten(), [-1.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], 1.0e-6)
      assert_all_close(mm(mm(T.as_type(p, :f32), l), u), [9, 8, 7, 6, 5, 4, 3, 2, 1, -1, 0, -1, 1, 0, 1, 1, 1, 1], 1.0e-6)

      {p, l, u} = LinAlg.lu(t([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
      assert_all_close(mm(mm(T.as_type(p, :f32), l), u), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 1.0e-6)

      assert_raise ArgumentError, "tensor must be a square matrix or a batch of square matrices, got shape: {3, 4}", fn ->
        LinAlg.lu(t([[1, 1, 1, 1], [-1, 4, 4, -1], [4, -2, 2, 0]]))
      end
    end

    test "matrix_power" do
      assert inspect(LinAlg.matrix_power(t([[1, 2], [3, 4]]), 0)) == "#Emily.Tensor<\n  s32[2][2]\n  [\n    [1, 0],\n    [0, 1]\n  ]\n>"
      assert T.to_list(LinAlg.matrix_power(T.eye(3), 65535)) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
      assert_all_close(LinAlg.matrix_power(t([[1, 2], [3, 4]]), -1), [-2.0, 1.0, 1.5, -0.5], 1.0e-5)
      assert T.to_list(LinAlg.matrix_power(T.iota({2, 2, 2}), 3)) == [[[6, 11], [22, 39]], [[514, 615], [738, 883]]]
      assert_all_close(LinAlg.matrix_power(T.iota({2, 2, 2}), -3),
                       [-4.875, 1.375, 2.75, -0.75, -110.37397766113281, 76.8742904663086, 92.24915313720703, -64.2494125366211], 1.0e-4)

      assert_raise ArgumentError, ~r/matrix_power\/2 expects a square matrix or a batch of square matrices, got tensor with shape: \{3, 2\}/, fn ->
        LinAlg.matrix_power(t([[1, 2], [3, 4], [5, 6]]), 1)
      end
    end

    test "determinant" do
      assert T.to_number(LinAlg.determinant(t([[1.0, 2.0, 3.0], [1.0, -2.0, 3.0], [7.0, 8.0, 9.0]]))) == 48.0
      assert T.to_number(LinAlg.determinant(t([[1.0, 0.0], [3.0, 0.0]]))) == 0.0
      assert abs(T.to_number(LinAlg.determinant(t([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0], [4.0, 5.0, 6.0]])))) == 0.0
      assert_all_close(LinAlg.determinant(t([[1, 0, 0, 0], [0, 1, 2, 3], [0, 1, -2, 3], [0, 7, 8, 9.0]])), [48.0], 1.0e-6)
      assert_all_close(LinAlg.determinant(t([[0, 0, 0, 0, -1], [0, 1, 2, 3, 0], [0, 1, -2, 3, 0], [0, 7, 8, 9, 0], [1, 0, 0, 0, 0]])), [48.0], 1.0e-6)

      d = LinAlg.determinant(t([[[2, 4, 6, 7], [5, 1, 8, 8], [1, 7, 3, 1], [3, 9, 2, 4]], [[2, 5, 1, 3], [4, 1, 7, 9], [6, 8, 3, 2], [7, 8, 1, 4]]]))
      assert d.shape == {2}
      assert_all_close(d, [630.0, 630.0], 1.0e-5)

      c = LinAlg.determinant(t([[1, 0, 0], [0, Emily.Complex.new(0, 2), 0], [0, 0, 3]]))
      assert c.type == {:c, 64}
      assert T.to_number(c) == Emily.Complex.new(0.0, 6.0)
    end

    test "norm" do
      assert T.to_number(LinAlg.norm(t([3, 4]), ord: 1)) == 7.0
      assert T.to_number(LinAlg.norm(t([3, -4]), ord: :inf)) == 4.0
      assert T.to_number(LinAlg.norm(t([3, -4]), ord: :neg_inf)) == 3.0
      assert T.to_number(LinAlg.norm(t([3, -4, 0, 0]), ord: 0)) == 2.0
      assert T.to_number(LinAlg.norm(t([[3, -1], [2, -4]]), ord: -1)) == 5.0
      assert T.to_number(LinAlg.norm(t([[3, -2], [2, -4]]), ord: 1)) == 6.0
      assert T.to_number(LinAlg.norm(t([[3, -2], [2, -4]]), ord: :neg_inf)) == 5.0
      assert T.to_number(LinAlg.norm(t([[3, -2], [2, -4]]), ord: :inf)) == 6.0
      assert T.to_number(LinAlg.norm(t([[3, 0], [0, -4]]), ord: :frobenius)) == 5.0
      assert_all_close(LinAlg.norm(t([[1, 0, 0], [0, -4, 0], [0, 0, 9]]), ord: -2), [1.0], 1.0e-6)
      assert T.to_number(LinAlg.norm(t([[3, 0], [0, -4]]))) == 5.0
      assert T.to_list(LinAlg.norm(t([[3, 4], [0, -4]]), axes: [1])) == [5.0, 4.0]
      assert T.to_list(LinAlg.norm(t([[3, 4], [0, -4]]), axes: [0], keep_axes: true)) == [[3.0, 5.656854152679443]]
      assert T.to_list(LinAlg.norm(t([[Emily.Complex.new(0, 3), 4], [4, 0]]), axes: [0])) == [5.0, 4.0]
      assert T.to_number(LinAlg.norm(t([[Emily.Complex.new(0, 3), 0], [4, 0]]), ord: :neg_inf)) == 3.0
      assert T.to_number(LinAlg.norm(t([[0, 0], [0, 0]]))) == 0.0
      assert LinAlg.norm(t([1.0, 2.0], type: :f64)).type == {:f, 64}

      assert_raise ArgumentError, "expected a 2-D tensor for ord: :frobenius, got a 1-D tensor", fn ->
        LinAlg.norm(t([3, 4]), ord: :frobenius)
      end

      assert_raise ArgumentError, ~r/expected 1-D or 2-D tensor/, fn -> LinAlg.norm(t(1)) end
      assert_raise ArgumentError, ~r/invalid :ord for 2-D tensor, got: 3/, fn -> LinAlg.norm(t([[1]]), ord: 3) end
    end

    test "matrix_rank and least_squares" do
      assert T.to_number(LinAlg.matrix_rank(t([[1, 2], [3, 4]]))) == 2
      assert T.to_number(LinAlg.matrix_rank(t([[1, 1, 1], [2, 2, 2], [8, 9, 10], [-2, 1, 5]]))) == 3

      assert_raise ArgumentError, "tensor must have rank 2, got rank 1 with shape {3}", fn ->
        LinAlg.matrix_rank(t([1, 2, 3]))
      end

      assert_all_close(LinAlg.least_squares(t([[1, 2], [2, 3]]), t([1, 2])), [1.0, 0.0], 1.0e-5)
      # Underdetermined: the minimum-norm solution (the doctest shows it scaled by 18).
      assert_all_close(LinAlg.least_squares(t([[1, 2, 3], [4, 5, 6]]), t([1, 2])),
                       [-1 / 18, 2 / 18, 5 / 18], 1.0e-5)
      assert_all_close(LinAlg.least_squares(t([[0, 1], [1, 1], [2, 1], [3, 1]]), t([-1, 0.2, 0.9, 2.1])),
                       [1.0, -0.95], 1.0e-5)

      assert_raise ArgumentError, "tensor of 1st argument must have rank 2, got rank 1 with shape {3}", fn ->
        LinAlg.least_squares(t([1, 2, 3]), t([1, 2]))
      end

      assert_raise ArgumentError, "tensor of 2nd argument must have rank 1, got rank 2 with shape {2, 2}", fn ->
        LinAlg.least_squares(t([[1, 2], [2, 3]]), t([[1, 2], [3, 4]]))
      end

      assert_raise ArgumentError, ~r/least_squares\/2 is not yet implemented for complex inputs/, fn ->
        LinAlg.least_squares(t([[1, Emily.Complex.new(0, 2)], [3, Emily.Complex.new(0, -4)]]), t([1, 2]))
      end

      assert_raise ArgumentError, ~r/must be the same, got 1st argument shape \{2, 2\} and 2nd argument shape \{3\}/, fn ->
        LinAlg.least_squares(t([[1, 2], [2, 3]]), t([1, 2, 3]))
      end
    end

    test "adjoint" do
      c = LinAlg.adjoint(t([[1, Emily.Complex.new(0, 2)], [3, Emily.Complex.new(0, -4)]]))
      assert inspect(c) == "#Emily.Tensor<\n  c64[2][2]\n  [\n    [1.0-0.0i, 3.0-0.0i],\n    [0.0-2.0i, 0.0+4.0i]\n  ]\n>"
    end
  end

  describe "numpy oracle (float64), every dtype, strided inputs" do
    test "factorizations and solvers reconstruct and match numpy.linalg" do
      a_vals = rand(2 * 4 * 4, 1)
      b_vals = rand(2 * 4 * 3, 2)
      r_vals = rand(5 * 3, 3)

      want =
        Numpy.run(
          """
          s = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
          out['chol'] = np.linalg.cholesky(s)
          out['det'] = np.linalg.det(a)
          out['inv'] = np.linalg.inv(a)
          out['solve'] = np.linalg.solve(a, b)
          out['tri'] = np.linalg.solve(np.tril(a), b)
          out['triT'] = np.linalg.solve(np.swapaxes(np.triu(a), -1, -2), b)
          out['eig'] = np.linalg.eigvalsh(s)
          out['sv'] = np.linalg.svd(r, compute_uv=False)
          out['pinv'] = np.linalg.pinv(r)
          out['inv_t'] = np.linalg.inv(np.swapaxes(a, -1, -2))
          out['s'] = s
          """,
          a: {a_vals, {2, 4, 4}},
          b: {b_vals, {2, 4, 3}},
          r: {r_vals, {5, 3}}
        )

      for type <- [:f32, :f64] do
        tol = if type == :f32, do: 1.0e-4, else: 1.0e-10
        a = mat(a_vals, {2, 4, 4}, type)
        b = mat(b_vals, {2, 4, 3}, type)
        r = mat(r_vals, {5, 3}, type)
        s = mat(elem(want["s"], 1), {2, 4, 4}, type)

        l = LinAlg.cholesky(s)
        assert l.type == Emily.Tensor.Type.normalize!(type)
        assert_all_close(l, elem(want["chol"], 1), tol)
        assert_all_close(mm(l, LinAlg.adjoint(l)), s, tol)
        assert_all_close(LinAlg.determinant(a), elem(want["det"], 1), tol)
        assert_all_close(LinAlg.invert(a), elem(want["inv"], 1), tol)
        assert_all_close(LinAlg.invert(T.transpose(a, axes: [0, 2, 1])), elem(want["inv_t"], 1), tol)
        assert_all_close(LinAlg.solve(a, b), elem(want["solve"], 1), tol)
        assert_all_close(LinAlg.triangular_solve(a, b), elem(want["tri"], 1), tol)
        assert_all_close(LinAlg.triangular_solve(a, b, lower: false, transform_a: :transpose), elem(want["triT"], 1), tol)

        {w, v} = LinAlg.eigh(s)
        assert_all_close(w, elem(want["eig"], 1), tol)
        assert_all_close(mm(T.multiply(v, T.new_axis(w, 1)), LinAlg.adjoint(v)), s, tol)

        {u, sv, vt} = LinAlg.svd(r, full_matrices?: false)
        assert_all_close(sv, elem(want["sv"], 1), tol)
        assert_all_close(mm(T.multiply(u, sv), vt), r, tol)
        {u, _sv, vt} = LinAlg.svd(r)
        assert u.shape == {5, 5} and vt.shape == {3, 3}
        assert_all_close(LinAlg.pinv(r), elem(want["pinv"], 1), tol * 10)

        for mode <- [:reduced, :complete] do
          {q, rr} = LinAlg.qr(r, mode: mode)
          assert_all_close(mm(q, rr), r, tol)
        end

        {p, l, u} = LinAlg.lu(a)
        assert_all_close(mm(mm(p, l), u), a, tol)
      end
    end

    test "integer, f16 and bf16 inputs" do
      a = t([[4, 1], [1, 3]])
      assert LinAlg.cholesky(a).type == {:f, 32}
      h = LinAlg.cholesky(T.as_type(a, :f16))
      assert h.type == {:f, 16}
      assert_all_close(h, [2.0, 0.0, 0.5, 1.6583123951777], 1.0e-3)
      assert LinAlg.invert(T.as_type(a, :bf16)).type == {:bf, 16}
      assert LinAlg.determinant(T.as_type(a, :f64)).type == {:f, 64}
      {q, _} = LinAlg.qr(T.as_type(a, :c128))
      assert q.type == {:c, 128}
    end
  end
end
