defmodule Emily.IO.GGUFTest do
  use ExUnit.Case, async: true
  import Bitwise

  @golden Path.expand("../../oracle/golden", __DIR__)
  @path Path.join(@golden, "gguf_types.gguf")

  # A scratch directory per test under the system's temp dir (not the
  # project tree), removed afterwards.
  setup do
    dir = Path.join(System.tmp_dir!(), "emily_io_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{tmp_dir: dir}
  end

  test "open! reads the version, every metadata type and the tensor infos" do
    gguf = Emily.GGUF.open!(@path)
    assert gguf.version == 3
    assert gguf.alignment == 32
    m = gguf.metadata
    assert m["general.architecture"] == "llama"
    assert m["t.u8"] == 200
    assert m["t.i8"] == -5
    assert m["t.u16"] == 60_000
    assert m["t.i16"] == -30_000
    assert m["t.u32"] == 4_000_000_000
    assert m["t.i32"] == -2_000_000_000
    assert m["t.f32"] == 0.25
    assert m["t.bool"] == true
    assert m["t.string"] == "héllo"
    assert m["t.u64"] == 18_446_744_073_709_551_615
    assert m["t.i64"] == -9_223_372_036_854_775_808
    assert m["t.f64"] == -1.5
    assert m["t.arr_i32"] == [1, -2, 3]
    assert m["t.arr_str"] == ["a", "", "été"]
    assert m["t.arr_f32"] == [0.5, -1.0]
    assert m["t.arr_bool"] == [true, false]
    assert m["t.nested"] == [[1, 2], [3]]

    infos = Map.new(gguf.tensors, &{&1.name, &1})
    assert %{shape: {3, 4}, type: :f32} = infos["w.f32"]
    assert %{shape: {2, 8}, type: :f16} = infos["w.f16"]
    assert %{shape: {2, 4}, type: :bf16} = infos["w.bf16"]
    assert %{shape: {2, 64}, type: :q8_0, ggml_type: 8, nbytes: 136} = infos["w.q8_0"]
  end

  test "tensor! and tensors!" do
    gguf = Emily.GGUF.open!(@path)
    f32 = Emily.GGUF.tensor!(gguf, "w.f32")
    assert %Emily.Backend{} = f32.data
    assert f32.shape == {3, 4} and f32.type == {:f, 32}
    assert Emily.GGUF.tensor!(gguf, "w.f16").type == {:f, 16}
    assert Emily.GGUF.tensor!(gguf, "w.bf16").type == {:bf, 16}

    assert {:ggml, :q8_0, {2, 64}, raw} = Emily.GGUF.tensor!(gguf, "w.q8_0")
    assert raw.shape == {2, 68} and raw.type == {:u, 8}
    # The first block's scale is an f16 and its 32 values s8: decode by hand.
    <<scale::little-float-16, qs::binary-size(32), _::binary>> = Nx.to_binary(raw)
    deq = for <<q::signed-8 <- qs>>, do: scale * q
    first = Nx.to_flat_list(Emily.GGUF.tensor!(gguf, "w.f32")) |> length()
    assert first == 12
    assert length(deq) == 32

    all = Emily.GGUF.tensors!(gguf)
    assert map_size(all) == 4
    assert Nx.to_binary(all["w.f32"]) == Nx.to_binary(f32)

    assert_raise ArgumentError, ~r/no tensor "nope"/, fn -> Emily.GGUF.tensor!(gguf, "nope") end
  end

  describe "hostile files raise ArgumentError" do
    test "truncated anywhere", %{tmp_dir: dir} do
      good = File.read!(@path)
      gguf = Emily.GGUF.open!(@path)
      # The writer pads the file's end: cut inside the last tensor instead.
      data_end = Enum.max(for t <- gguf.tensors, do: gguf.data_offset + t.offset + t.nbytes)

      for n <- [0, 3, 4, 10, 23, 24, 100, 500, gguf.data_offset - 1, data_end - 1] do
        path = Path.join(dir, "t#{n}.gguf")
        File.write!(path, binary_part(good, 0, n))
        assert_raise ArgumentError, ~r/t#{n}\.gguf/, fn -> Emily.GGUF.open!(path) end
      end
    end

    test "absurd counts, lengths and types", %{tmp_dir: dir} do
      header = fn nt, nk -> <<"GGUF", 3::little-32, nt::little-64, nk::little-64>> end
      str = fn s -> <<byte_size(s)::little-64, s::binary>> end

      cases = [
        {header.(0, 0xFFFFFFFFFFFFFFFF), ~r/metadata count at offset 16/},
        {header.(1 <<< 40, 0), ~r/tensor count/},
        {header.(0, 1) <> <<1000::little-64>> <> :binary.copy("x", 30),
         ~r/metadata key at offset 24/},
        {header.(0, 1) <>
           str.("k") <>
           <<9::little-32, 10::little-32, 1 <<< 60::little-64>> <> :binary.copy(<<0>>, 16),
         ~r/array of/},
        {header.(0, 1) <> str.("k") <> <<13::little-32>> <> :binary.copy(<<0>>, 16),
         ~r/unknown value type 13/},
        {header.(1, 0) <>
           str.("t") <> <<9::little-32>> <> :binary.copy(<<1::little-64>>, 9) <> <<0::32, 0::64>>,
         ~r/9 dims/},
        {header.(1, 0) <>
           str.("t") <>
           <<1::little-32, 8::little-64, 0::little-32, 64::little-64>> <>
           :binary.copy(<<0>>, 64), ~r/past/},
        {header.(1, 0) <>
           str.("t") <>
           <<1::little-32, 8::little-64, 0::little-32, 4::little-64>> <>
           :binary.copy(<<0>>, 64), ~r/alignment/}
      ]

      for {{bytes, message}, i} <- Enum.with_index(cases) do
        path = Path.join(dir, "c#{i}.gguf")
        File.write!(path, bytes)
        assert_raise ArgumentError, message, fn -> Emily.GGUF.open!(path) end
      end
    end

    test "an unsupported ggml type is listed but refused by tensor!", %{tmp_dir: dir} do
      str = fn s -> <<byte_size(s)::little-64, s::binary>> end

      bytes =
        <<"GGUF", 3::little-32, 1::little-64, 0::little-64>> <>
          str.("k") <> <<1::little-32, 256::little-64, 10::little-32, 0::little-64>>

      pad = rem(32 - rem(byte_size(bytes), 32), 32)
      path = Path.join(dir, "q2k.gguf")
      File.write!(path, bytes <> :binary.copy(<<0>>, pad + 84))
      gguf = Emily.GGUF.open!(path)
      assert [%{name: "k", type: :q2_k}] = gguf.tensors
      assert_raise ArgumentError, ~r/q2_k/, fn -> Emily.GGUF.tensor!(gguf, "k") end
    end
  end
end
