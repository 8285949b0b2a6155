defmodule Emily.Tensor.BackendTest do
  # Not async: some tests set the application-wide default backend.
  use ExUnit.Case, async: false

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.Core

  import Bitwise, only: [<<<: 2]

  doctest Emily.Tensor.Backend

  @types [
    {:u, 8},
    {:u, 16},
    {:u, 32},
    {:u, 64},
    {:s, 8},
    {:s, 16},
    {:s, 32},
    {:s, 64},
    {:f, 16},
    {:bf, 16},
    {:f, 32},
    {:f, 64},
    {:c, 64},
    {:c, 128}
  ]

  # These tests run where no GPU is usable (CI has none).
  @gpu_message ~r/device :gpu: the CUDA backend is not available/

  setup do
    on_exit(fn -> Application.delete_env(:emily, :default_backend) end)
    :ok
  end

  # Random bytes of `count` elements of `type` as a tensor of `shape`. Float
  # types get finite values (random bits would hold NaNs, whose payloads
  # are fine but make failures hard to read).
  defp random_tensor({kind, bits} = type, shape) do
    count = shape |> Tuple.to_list() |> Enum.product()

    values =
      for _ <- 1..max(count, 1) do
        case kind do
          k when k in [:u, :s] -> :rand.uniform(1 <<< bits) - 1
          _ -> :rand.uniform() * 200 - 100
        end
      end
      |> Enum.take(count)

    values =
      if kind == :c,
        do: Enum.map(values, &Emily.Complex.new(&1, :rand.uniform() - 0.5)),
        else: values

    T.tensor(values, type: type) |> T.reshape(shape)
  end

  defp strided(t), do: Core.wrap(Native.transpose(t.ref, Enum.reverse(T.axes(t))))

  describe "default backend" do
    test "is the CPU unless set; default_backend/1 returns the previous one" do
      assert T.default_backend() == {Emily.Tensor, [device: :cpu]}
      assert T.default_backend({Emily.Tensor, device: :gpu}) == {Emily.Tensor, [device: :cpu]}
      assert T.default_backend() == {Emily.Tensor, [device: :gpu]}
      assert T.default_backend(Emily.Tensor) == {Emily.Tensor, [device: :gpu]}
      assert T.default_backend() == {Emily.Tensor, [device: :cpu]}
    end

    test "rejects other backends, unknown devices and unknown options" do
      assert_raise ArgumentError, ~r/Emily has one backend/, fn -> T.default_backend(Foo) end

      assert_raise ArgumentError, ~r/Emily has one backend/, fn ->
        T.default_backend({Foo, []})
      end

      assert_raise ArgumentError, ~r/unknown device :tpu/, fn ->
        T.default_backend({Emily.Tensor, device: :tpu})
      end

      assert_raise ArgumentError, ~r/unknown keys \[:client\]/, fn ->
        T.default_backend({Emily.Tensor, client: :host})
      end

      assert_raise ArgumentError, ~r/Emily has one backend/, fn ->
        T.global_default_backend(:cpu)
      end

      assert T.default_backend() == {Emily.Tensor, [device: :cpu]}
    end

    test "the global default applies to processes without their own" do
      assert T.global_default_backend({Emily.Tensor, device: :gpu}) ==
               {Emily.Tensor, [device: :cpu]}

      other = Task.async(fn -> T.default_backend() end) |> Task.await()
      assert other == {Emily.Tensor, [device: :gpu]}

      assert_raise ArgumentError, @gpu_message, fn -> T.tensor([1]) end

      # A process default wins over the global one.
      T.with_default_backend(Emily.Tensor, fn ->
        assert T.to_list(T.tensor([1, 2])) == [1, 2]
      end)

      assert T.global_default_backend(Emily.Tensor) == {Emily.Tensor, [device: :gpu]}
      assert T.to_list(T.tensor([3])) == [3]
    end

    test "with_default_backend restores the previous default, also after a raise" do
      T.default_backend({Emily.Tensor, device: :gpu})

      assert T.with_default_backend(Emily.Tensor, fn -> T.to_number(T.tensor(7)) end) == 7
      assert T.default_backend() == {Emily.Tensor, [device: :gpu]}
      T.default_backend(Emily.Tensor)

      assert_raise RuntimeError, "boom", fn ->
        T.with_default_backend({Emily.Tensor, device: :gpu}, fn -> raise "boom" end)
      end

      assert T.default_backend() == {Emily.Tensor, [device: :cpu]}

      assert_raise ArgumentError, ~r/function of no arguments/, fn ->
        T.with_default_backend(Emily.Tensor, fn x -> x end)
      end
    end

    test "creation functions compute on the default device or their :backend" do
      creators = [
        fn opts -> T.tensor([1, 2], opts) end,
        fn opts -> T.from_binary(<<1, 2>>, :u8, opts) end,
        fn opts -> T.iota({2}, opts) end,
        fn opts -> T.eye(2, opts) end
      ]

      for create <- creators do
        assert_raise ArgumentError, @gpu_message, fn ->
          create.(backend: {Emily.Tensor, device: :gpu})
        end

        assert %Emily.Tensor{} = create.(backend: {Emily.Tensor, device: :cpu})

        T.with_default_backend({Emily.Tensor, device: :gpu}, fn ->
          assert_raise ArgumentError, @gpu_message, fn -> create.([]) end
          assert %Emily.Tensor{} = create.(backend: Emily.Tensor)
        end)

        assert_raise ArgumentError, ~r/Emily has one backend/, fn ->
          create.(backend: Nx.BinaryBackend)
        end
      end
    end
  end

  describe "backend_copy/2" do
    test "copies every dtype, contiguous and strided, into a buffer of its own" do
      for type <- @types, make <- [& &1, &strided/1] do
        original = make.(random_tensor(type, {3, 4}))
        expected = T.to_binary(original)
        copy = T.backend_copy(original)

        assert copy.type == type
        assert copy.shape == original.shape
        assert Native.is_evaluated(copy.ref)
        refute copy.ref == original.ref
        assert T.backend_deallocate(original) == :ok
        assert T.to_binary(copy) == expected
      end
    end

    test "copies lazy results, empty tensors, scalars and containers" do
      lazy = T.add(T.iota({2, 3}), 10)
      assert T.to_list(T.backend_copy(lazy, Emily.Tensor)) == [[10, 11, 12], [13, 14, 15]]
      assert T.shape(T.backend_copy(T.iota({0, 3}))) == {0, 3}
      assert T.to_number(T.backend_copy(2.5)) == 2.5

      {a, %{b: b}} = T.backend_copy({T.tensor([1]), %{b: T.tensor([[2.0]])}})
      assert {T.to_list(a), T.to_list(b)} == {[1], [[2.0]]}
    end

    test "raises for templates, bad containers and unavailable devices" do
      assert_raise ArgumentError, ~r/backend_copy: the tensor is a template/, fn ->
        T.backend_copy(T.template({2}, :f32))
      end

      assert_raise ArgumentError, ~r/backend_copy expects a tensor/, fn -> T.backend_copy([1]) end

      assert_raise ArgumentError, @gpu_message, fn ->
        T.backend_copy(T.tensor(1), {Emily.Tensor, device: :gpu})
      end
    end
  end

  describe "backend_transfer/2" do
    test "to the CPU returns the tensors themselves" do
      t = T.iota({4})
      assert T.backend_transfer(t) === t
      assert T.backend_transfer(t, Emily.Tensor) === t
      assert T.backend_transfer({t, %{x: t}}, {Emily.Tensor, device: :cpu}) === {t, %{x: t}}
      assert T.to_number(T.backend_transfer(3)) == 3
    end

    test "to the GPU or another backend raises" do
      assert_raise ArgumentError, @gpu_message, fn ->
        T.backend_transfer(T.tensor(1), {Emily.Tensor, device: :gpu})
      end

      T.with_default_backend({Emily.Tensor, device: :gpu}, fn ->
        t = T.with_default_backend(Emily.Tensor, fn -> T.tensor(1) end)
        assert_raise ArgumentError, @gpu_message, fn -> T.backend_transfer(t) end
      end)

      assert_raise ArgumentError, ~r/Emily has one backend/, fn ->
        T.backend_transfer(T.tensor(1), Nx.BinaryBackend)
      end
    end
  end

  describe "backend_deallocate/1" do
    test "releases once; every later use raises ArgumentError" do
      t = T.tensor([1.0, 2.0, 3.0])
      assert T.backend_deallocate(t) == :ok
      assert T.backend_deallocate(t) == :already_deallocated

      uses = [
        fn -> T.to_binary(t) end,
        fn -> T.to_list(t) end,
        fn -> T.add(t, 1) end,
        fn -> T.sum(t) end,
        fn -> T.concatenate([T.tensor([0.0]), t]) end,
        fn -> T.backend_copy(t) end,
        fn -> T.to_pointer(t) end,
        fn -> Emily.to_binary(t.ref) end,
        fn -> Emily.eval(t.ref) end
      ]

      for use <- uses do
        assert_raise ArgumentError, ~r/the tensor was deallocated/, use
      end

      assert inspect(t) =~ "f32[3]\n  deallocated\n"
      # Metadata lives in the struct and still answers.
      assert T.shape(t) == {3}
    end

    test "frees the buffer when nothing else holds it" do
      t = T.iota({1_000_000}, type: :f32)
      Emily.eval(t.ref)
      before = Emily.Memory.stats().active
      assert T.backend_deallocate(t) == :ok
      # The stream's worker drops its own reference to an evaluated array
      # just after answering, so poll a bounded number of times.
      assert eventually?(100, fn -> before - Emily.Memory.stats().active >= 4_000_000 end)
    end

    test "does not affect tensors built from it before, or its copies" do
      base = T.iota({2, 3}, type: :f32)
      lazy = T.multiply(base, 2)
      view = T.transpose(base)
      copy = T.backend_copy(base)
      assert T.backend_deallocate(base) == :ok
      assert T.to_list(lazy) == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
      assert T.to_list(view) == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
      assert T.to_list(copy) == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    end

    test "containers, templates and bad arguments" do
      a = T.tensor(1)
      b = T.tensor(2)
      assert T.backend_deallocate({a, %{b: b}}) == :ok
      assert T.backend_deallocate(a) == :already_deallocated
      assert T.backend_deallocate(b) == :already_deallocated
      assert T.backend_deallocate(T.template({1}, :u8)) == :already_deallocated

      assert_raise ArgumentError, ~r/backend_deallocate\/1 expects a tensor/, fn ->
        T.backend_deallocate([a])
      end

      assert_raise ArgumentError, ~r/backend_deallocate: argument tensor must be/, fn ->
        Native.deallocate(make_ref())
      end
    end

    test "deallocating from many processes at once releases exactly once" do
      t = T.iota({1000})

      results =
        1..8
        |> Enum.map(fn _ -> Task.async(fn -> T.backend_deallocate(t) end) end)
        |> Enum.map(&Task.await/1)

      assert Enum.count(results, &(&1 == :ok)) == 1
      assert Enum.count(results, &(&1 == :already_deallocated)) == 7
    end

    test "deallocating while other processes compute with the tensor never crashes" do
      for _round <- 1..20 do
        t = T.iota({4096}, type: :f32)

        users =
          for _ <- 1..4 do
            Task.async(fn ->
              Enum.map(1..200, fn _ ->
                try do
                  t |> T.multiply(2.0) |> T.sum() |> T.to_number()
                rescue
                  e in ArgumentError -> e.message
                end
              end)
            end)
          end

        assert T.backend_deallocate(t) == :ok
        outcomes = users |> Enum.flat_map(&Task.await(&1, 30_000)) |> Enum.uniq()
        # A sum computed before the release is exact; a later call raises.
        for outcome <- outcomes do
          assert outcome == 4095 * 4096.0 or outcome =~ "deallocated"
        end
      end
    end
  end

  describe "to_pointer/2 and from_pointer/5" do
    test "round-trips every dtype, contiguous and strided" do
      for type <- @types, make <- [& &1, &strided/1] do
        t = make.(random_tensor(type, {4, 3}))
        pointer = T.to_pointer(t)
        assert %Emily.Tensor.Pointer{kind: :local, handle: nil} = pointer
        assert pointer.data_size == T.byte_size(t)
        back = T.from_pointer(Emily.Tensor, pointer, type, t.shape)
        assert back.type == type and back.shape == t.shape
        assert T.to_binary(back) == T.to_binary(t)
        # The same tensor gives the same pointer.
        assert T.to_pointer(t) == pointer
      end
    end

    test "reads any in-range part of a pointer, with any type and shape" do
      t = T.tensor(Enum.to_list(0..15), type: :u8)
      %{address: address} = pointer = T.to_pointer(t)

      tail = T.from_pointer(Emily.Tensor, %{pointer | address: address + 12}, :u8, {4})
      assert T.to_list(tail) == [12, 13, 14, 15]

      words = T.from_pointer(Emily.Tensor, pointer, :u32, {2, 2})
      assert T.to_binary(words) == T.to_binary(t)

      assert T.shape(T.from_pointer(Emily.Tensor, pointer, :f32, {0})) == {0}

      # An Nx.Pointer-like map is accepted.
      map = %{kind: :local, address: address, data_size: 16, handle: nil}
      assert T.to_list(T.from_pointer({Emily.Tensor, []}, map, :u8, {2})) == [0, 1]
      # Keeps `t` (hence its pointer) alive up to here.
      assert T.size(T.backend_copy(t)) == 16
    end

    test "refuses addresses it did not hand out, and ranges running past the end" do
      t = T.tensor([1, 2, 3, 4], type: :s32)
      %{address: address} = pointer = T.to_pointer(t)

      bad = [
        {%{pointer | address: address + 16}, :s32, {1}},
        {%{pointer | address: address + 4}, :s32, {4}},
        {pointer, :s32, {5}},
        {%{pointer | address: address - 4}, :s32, {1}},
        {%{pointer | address: 0}, :u8, {1}},
        {%{pointer | address: 8}, :u8, {1}},
        {%{pointer | address: 0xFFFF_FFFF_FFFF_FFF0}, :u8, {1}}
      ]

      for {p, type, shape} <- bad do
        assert_raise ArgumentError,
                     ~r/is not inside a pointer that to_pointer\/2 handed out/,
                     fn ->
                       # data_size is made large so that the engine's registry decides.
                       T.from_pointer(Emily.Tensor, %{p | data_size: 1 <<< 40}, type, shape)
                     end
      end

      assert_raise ArgumentError, ~r/needs 20 bytes, the pointer has 16/, fn ->
        T.from_pointer(Emily.Tensor, pointer, :s32, {5})
      end

      assert T.to_list(T.from_pointer(Emily.Tensor, pointer, :s32, {4})) == T.to_list(t)
    end

    test "random and nearby addresses are refused, never read" do
      t = T.iota({256}, type: :u8)
      %{address: start} = pointer = T.to_pointer(t)

      nearby = for d <- [-4096, -1, 256, 257, 4096, 1 <<< 20], do: start + d
      random = for _ <- 1..2000, do: :rand.uniform(1 <<< 64) - 1

      for address <- nearby ++ random,
          address >= 0 and (address < start or address >= start + 256) do
        assert_raise ArgumentError, ~r/not inside a pointer/, fn ->
          T.from_pointer(Emily.Tensor, %{pointer | address: address}, :u8, {1})
        end
      end

      assert T.to_list(T.from_pointer(Emily.Tensor, pointer, :u8, {256})) == T.to_list(t)
    end

    test "a pointer dies with its tensor: deallocation and garbage collection" do
      t = T.iota({8}, type: :f64)
      pointer = T.to_pointer(t)

      assert T.to_list(T.from_pointer(Emily.Tensor, pointer, :f64, {8})) ==
               Enum.map(0..7, &(&1 * 1.0))

      assert T.backend_deallocate(t) == :ok

      assert_raise ArgumentError, ~r/not inside a pointer/, fn ->
        T.from_pointer(Emily.Tensor, pointer, :f64, {8})
      end

      # A tensor that only lived in a finished process.
      pointer = Task.async(fn -> T.to_pointer(T.iota({1024})) end) |> Task.await()
      assert eventually_refused?(pointer, 100)
    end

    test "many processes register and read pointers concurrently" do
      1..8
      |> Enum.map(fn i ->
        Task.async(fn ->
          for _ <- 1..50 do
            t = T.add(T.iota({64}), i)
            p = T.to_pointer(t)
            assert T.to_binary(T.from_pointer(Emily.Tensor, p, :s32, {64})) == T.to_binary(t)
          end
        end)
      end)
      |> Enum.each(&Task.await(&1, 60_000))
    end

    test "large copies (dirty scheduler) are exact" do
      t = T.iota({600_000}, type: :f32)
      p = T.to_pointer(t)
      assert T.to_binary(T.from_pointer(Emily.Tensor, p, :f32, {600_000})) == T.to_binary(t)
      assert T.to_binary(T.backend_copy(t)) == T.to_binary(t)
    end

    test "bad modes, kinds, shapes, names and backends raise ArgumentError" do
      t = T.tensor([1, 2])
      pointer = T.to_pointer(t)

      assert_raise ArgumentError, ~r/mode :ipc is not supported/, fn ->
        T.to_pointer(t, mode: :ipc)
      end

      assert_raise ArgumentError, ~r/:mode must be :local or :ipc/, fn ->
        T.to_pointer(t, mode: :x)
      end

      assert_raise ArgumentError, ~r/unknown keys/, fn -> T.to_pointer(t, kind: :local) end
      assert_raise ArgumentError, ~r/to_pointer\/2 expects a tensor/, fn -> T.to_pointer(1) end
      assert_raise ArgumentError, ~r/has no bytes/, fn -> T.to_pointer(T.iota({0})) end

      assert_raise ArgumentError, ~r/the tensor is a template/, fn ->
        T.to_pointer(T.template({2}, :u8))
      end

      ipc = %Emily.Tensor.Pointer{kind: :ipc, address: nil, data_size: 8, handle: "h"}

      assert_raise ArgumentError, ~r/:ipc pointers are not supported/, fn ->
        T.from_pointer(Emily.Tensor, ipc, :s32, {2})
      end

      assert_raise ArgumentError, ~r/expected a pointer/, fn ->
        T.from_pointer(Emily.Tensor, 1234, :s32, {2})
      end

      assert_raise ArgumentError, ~r/expected a shape tuple/, fn ->
        T.from_pointer(Emily.Tensor, pointer, :s32, [2])
      end

      assert_raise ArgumentError, ~r/no named axes/, fn ->
        T.from_pointer(Emily.Tensor, pointer, :s32, {2}, names: [:x])
      end

      assert_raise ArgumentError, @gpu_message, fn ->
        T.from_pointer({Emily.Tensor, device: :gpu}, pointer, :s32, {2})
      end

      assert_raise ArgumentError, ~r/address must be a non-negative integer/, fn ->
        Native.from_pointer(-1, [1], {:u, 8})
      end
    end
  end

  defp eventually?(0, _check), do: false

  defp eventually?(tries, check) do
    check.() or
      (
        Process.sleep(10)
        eventually?(tries - 1, check)
      )
  end

  # The destructor of a tensor's resource runs once its last holder is
  # gone; a finished process's heap is freed asynchronously, so poll a
  # bounded number of times.
  defp eventually_refused?(_pointer, 0), do: false

  defp eventually_refused?(pointer, tries) do
    :erlang.garbage_collect()

    try do
      T.from_pointer(Emily.Tensor, pointer, :s32, {1024})
      Process.sleep(10)
      eventually_refused?(pointer, tries - 1)
    rescue
      e in ArgumentError -> e.message =~ "not inside a pointer"
    end
  end
end
