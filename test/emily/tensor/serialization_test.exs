defmodule Emily.Tensor.SerializationTest do
  use ExUnit.Case, async: true
  doctest Emily.Tensor.Serialization

  alias Emily.Tensor, as: T

  test "serialize/deserialize round-trips every type, containers and big-endian data" do
    for type <- Emily.Tensor.Type.all() do
      t = T.iota({2, 3}, type: type)
      back = t |> T.serialize() |> T.deserialize()
      assert T.type(back) == type
      assert T.shape(back) == {2, 3}
      assert T.to_binary(back) == T.to_binary(t)
    end

    data = {T.tensor([1.0, 2.0]), %{b: T.tensor(3), a: [T.tensor([[1]], type: :s8)]}}
    {x, %{a: [y], b: z}} = data |> T.serialize(compressed: 6) |> T.deserialize()
    assert T.to_list(x) == [1.0, 2.0] and T.to_list(y) == [[1]] and T.to_number(z) == 3

    # A big-endian producer: the same header with the endianness byte 1.
    term = :erlang.term_to_binary({:t, {2}, {:s, 16}, [nil], [], 0, 4})
    bin = <<"nx", 1, 1, byte_size(term)::64-big, term::binary, 1::16-big, -2::16-big>>
    assert bin |> T.deserialize() |> T.to_list() == [1, -2]

    assert_raise ArgumentError, ~r/bad header/, fn -> T.deserialize("nope") end
  end

  test "load_numpy! and load_numpy_archive! read what numpy writes" do
    dir = Path.join(System.tmp_dir!(), "emily_npy_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)

    try do
      script = """
      import numpy as np, sys
      d = sys.argv[1]
      a = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
      np.save(d + '/c.npy', a)
      np.save(d + '/f.npy', np.asfortranarray(a.astype(np.int16)))
      np.save(d + '/be.npy', a.astype('>f8'))
      np.save(d + '/cplx.npy', (a + 1j * a).astype(np.complex64))
      np.save(d + '/bool.npy', a > 1)
      np.savez(d + '/plain.npz', x=a, y=np.array([1, 2], dtype=np.uint8))
      np.savez_compressed(d + '/zipped.npz', x=a)
      """

      {_, 0} = System.cmd("/usr/bin/python3", ["-c", script, dir], stderr_to_stdout: true)
      want = for i <- 0..11, do: i / 4
      load = &T.load_numpy!(File.read!(Path.join(dir, &1)))

      c = load.("c.npy")
      assert T.shape(c) == {3, 4} and T.type(c) == {:f, 32} and T.to_flat_list(c) == want
      f = load.("f.npy")
      assert T.type(f) == {:s, 16} and T.to_flat_list(f) == Enum.map(want, &trunc/1)
      assert load.("be.npy") |> T.to_flat_list() == want
      assert load.("cplx.npy") |> T.real() |> T.to_flat_list() == want
      assert load.("bool.npy") |> T.to_flat_list() == Enum.map(want, &if(&1 > 1, do: 1, else: 0))

      plain = T.load_numpy_archive!(File.read!(Path.join(dir, "plain.npz")))
      assert plain |> Map.new() |> Map.keys() |> Enum.sort() == ["x", "y"]
      assert plain |> Map.new() |> Map.fetch!("y") |> T.to_list() == [1, 2]
      [{"x", zipped}] = T.load_numpy_archive!(File.read!(Path.join(dir, "zipped.npz")))
      assert T.to_flat_list(zipped) == want
    after
      File.rm_rf!(dir)
    end

    assert_raise ArgumentError, ~r/not a .npy binary/, fn -> T.load_numpy!("xx") end
    assert_raise ArgumentError, ~r/not a .npz archive/, fn -> T.load_numpy_archive!("xx") end
  end

  test "to_heatmap shades entries, with and without ANSI" do
    plain = T.iota({2, 3}) |> T.to_heatmap(ansi_enabled: false) |> inspect()
    assert plain == "#Emily.Heatmap<\n  s32[2][3]\n  023\n  579\n>"
    ansi = T.iota({2, 2}) |> T.to_heatmap(ansi_enabled: true) |> inspect()
    assert ansi =~ IO.ANSI.color_background(232)
    assert ansi =~ IO.ANSI.color_background(255)
    assert_raise ArgumentError, ~r/rank >= 2/, fn -> T.to_heatmap(T.iota({3})) end
  end
end
