defmodule Emily.Backend.TransferTest do
  # Not async: deallocation races and pointer registries are process-wide.
  use ExUnit.Case, async: false

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias Emily.Native

  import Bitwise, only: [<<<: 2]

  @types EmilyTest.Helpers.nx_types()

  # These tests run where no GPU is usable (CI has none).

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
        do: Enum.map(values, &Complex.new(&1, :rand.uniform() - 0.5)),
        else: values

    Nx.tensor(values, type: type) |> Nx.reshape(shape)
  end

  defp strided(t), do: wrap(Native.transpose(t.data.ref, Enum.reverse(Nx.axes(t))))

  describe "backend_copy/2" do
    test "copies every dtype, contiguous and strided, into a buffer of its own" do
      for type <- @types, make <- [& &1, &strided/1] do
        original = make.(random_tensor(type, {3, 4}))
        expected = Nx.to_binary(original)
        copy = Nx.backend_copy(original, Emily.Backend)

        assert copy.type == type
        assert copy.shape == original.shape
        refute copy.data.ref == original.data.ref
        assert Nx.backend_deallocate(original) == :ok
        assert Nx.to_binary(copy) == expected
      end
    end

    test "copies lazy results, empty tensors, scalars and containers" do
      lazy = Nx.add(Nx.iota({2, 3}), 10)
      assert Nx.to_list(Nx.backend_copy(lazy, Emily.Backend)) == [[10, 11, 12], [13, 14, 15]]
      assert Nx.to_number(Nx.backend_copy(2.5)) == 2.5

      {a, %{b: b}} = Nx.backend_copy({Nx.tensor([1]), %{b: Nx.tensor([[2.0]])}}, Emily.Backend)
      assert {Nx.to_list(a), Nx.to_list(b)} == {[1], [[2.0]]}
    end
  end

  describe "backend_deallocate/1" do
    test "releases once; every later use raises ArgumentError" do
      t = Nx.tensor([1.0, 2.0, 3.0])
      assert Nx.backend_deallocate(t) == :ok
      assert Nx.backend_deallocate(t) == :already_deallocated

      uses = [
        fn -> Nx.to_binary(t) end,
        fn -> Nx.to_list(t) end,
        fn -> Nx.add(t, 1) end,
        fn -> Nx.sum(t) end,
        fn -> Nx.concatenate([Nx.tensor([0.0]), t]) end,
        fn -> Nx.backend_copy(t) end,
        fn -> Nx.to_pointer(t) end,
        fn -> Emily.to_binary(t.data.ref) end,
        fn -> Emily.eval(t.data.ref) end
      ]

      for use <- uses do
        assert_raise ArgumentError, ~r/the tensor was deallocated/, use
      end

      # Metadata lives in the struct and still answers.
      assert Nx.shape(t) == {3}
    end

    test "frees the buffer when nothing else holds it" do
      t = Nx.iota({1_000_000}, type: :f32)
      Emily.eval(t.data.ref)
      before = Emily.Memory.stats().active
      assert Nx.backend_deallocate(t) == :ok
      # The stream's worker drops its own reference to an evaluated array
      # just after answering, so poll a bounded number of times.
      assert eventually?(100, fn -> before - Emily.Memory.stats().active >= 4_000_000 end)
    end

    test "does not affect tensors built from it before, or its copies" do
      base = Nx.iota({2, 3}, type: :f32)
      lazy = Nx.multiply(base, 2)
      view = Nx.transpose(base)
      copy = Nx.backend_copy(base)
      assert Nx.backend_deallocate(base) == :ok
      assert Nx.to_list(lazy) == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
      assert Nx.to_list(view) == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
      assert Nx.to_list(copy) == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    end

    test "deallocating from many processes at once releases exactly once" do
      t = Nx.iota({1000})

      results =
        1..8
        |> Enum.map(fn _ -> Task.async(fn -> Nx.backend_deallocate(t) end) end)
        |> Enum.map(&Task.await/1)

      assert Enum.count(results, &(&1 == :ok)) == 1
      assert Enum.count(results, &(&1 == :already_deallocated)) == 7
    end

    test "deallocating while other processes compute with the tensor never crashes" do
      for _round <- 1..20 do
        t = Nx.iota({4096}, type: :f32)

        users =
          for _ <- 1..4 do
            Task.async(fn ->
              Enum.map(1..200, fn _ ->
                try do
                  t |> Nx.multiply(2.0) |> Nx.sum() |> Nx.to_number()
                rescue
                  e in ArgumentError -> e.message
                end
              end)
            end)
          end

        assert Nx.backend_deallocate(t) == :ok
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
        pointer = Nx.to_pointer(t)
        assert %Nx.Pointer{kind: :local, handle: nil} = pointer
        assert pointer.data_size == Nx.byte_size(t)
        back = Nx.from_pointer(Emily.Backend, pointer, type, t.shape)
        assert back.type == type and back.shape == t.shape
        assert Nx.to_binary(back) == Nx.to_binary(t)
        # The same tensor gives the same pointer.
        assert Nx.to_pointer(t) == pointer
      end
    end

    test "reads any in-range part of a pointer, with any type and shape" do
      t = Nx.tensor(Enum.to_list(0..15), type: :u8)
      %{address: address} = pointer = Nx.to_pointer(t)

      tail = Nx.from_pointer(Emily.Backend, %{pointer | address: address + 12}, :u8, {4})
      assert Nx.to_list(tail) == [12, 13, 14, 15]

      words = Nx.from_pointer(Emily.Backend, pointer, :u32, {2, 2})
      assert Nx.to_binary(words) == Nx.to_binary(t)

      # An Nx.Pointer-like map is accepted.
      map = %{kind: :local, address: address, data_size: 16, handle: nil}
      assert Nx.to_list(Nx.from_pointer({Emily.Backend, []}, map, :u8, {2})) == [0, 1]
      # Keeps `t` (hence its pointer) alive up to here.
      assert Nx.size(Nx.backend_copy(t)) == 16
    end

    test "refuses addresses it did not hand out, and ranges running past the end" do
      t = Nx.tensor([1, 2, 3, 4], type: :s32)
      %{address: address} = pointer = Nx.to_pointer(t)

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
                       Nx.from_pointer(Emily.Backend, %{p | data_size: 1 <<< 40}, type, shape)
                     end
      end

      assert_raise ArgumentError, ~r/needs 20 bytes, the pointer has 16/, fn ->
        Nx.from_pointer(Emily.Backend, pointer, :s32, {5})
      end

      assert Nx.to_list(Nx.from_pointer(Emily.Backend, pointer, :s32, {4})) == Nx.to_list(t)
    end

    test "random and nearby addresses are refused, never read" do
      t = Nx.iota({256}, type: :u8)
      %{address: start} = pointer = Nx.to_pointer(t)

      nearby = for d <- [-4096, -1, 256, 257, 4096, 1 <<< 20], do: start + d
      random = for _ <- 1..2000, do: :rand.uniform(1 <<< 64) - 1

      for address <- nearby ++ random,
          address >= 0 and (address < start or address >= start + 256) do
        assert_raise ArgumentError, ~r/not inside a pointer/, fn ->
          Nx.from_pointer(Emily.Backend, %{pointer | address: address}, :u8, {1})
        end
      end

      assert Nx.to_list(Nx.from_pointer(Emily.Backend, pointer, :u8, {256})) == Nx.to_list(t)
    end

    test "a pointer dies with its tensor: deallocation and garbage collection" do
      t = Nx.iota({8}, type: :f64)
      pointer = Nx.to_pointer(t)

      assert Nx.to_list(Nx.from_pointer(Emily.Backend, pointer, :f64, {8})) ==
               Enum.map(0..7, &(&1 * 1.0))

      assert Nx.backend_deallocate(t) == :ok

      assert_raise ArgumentError, ~r/not inside a pointer/, fn ->
        Nx.from_pointer(Emily.Backend, pointer, :f64, {8})
      end

      # A tensor that only lived in a finished process.
      pointer =
        Task.async(fn -> Nx.to_pointer(Nx.iota({1024}, backend: Emily.Backend)) end)
        |> Task.await()

      assert eventually_refused?(pointer, 100)
    end

    test "many processes register and read pointers concurrently" do
      1..8
      |> Enum.map(fn i ->
        Task.async(fn ->
          for _ <- 1..50 do
            t = Nx.add(Nx.iota({64}, backend: Emily.Backend), i)
            p = Nx.to_pointer(t)
            assert Nx.to_binary(Nx.from_pointer(Emily.Backend, p, :s32, {64})) == Nx.to_binary(t)
          end
        end)
      end)
      |> Enum.each(&Task.await(&1, 60_000))
    end

    test "large copies (dirty scheduler) are exact" do
      t = Nx.iota({600_000}, type: :f32)
      p = Nx.to_pointer(t)
      assert Nx.to_binary(Nx.from_pointer(Emily.Backend, p, :f32, {600_000})) == Nx.to_binary(t)
      assert Nx.to_binary(Nx.backend_copy(t)) == Nx.to_binary(t)
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
      Nx.from_pointer(Emily.Backend, pointer, :s32, {1024})
      Process.sleep(10)
      eventually_refused?(pointer, tries - 1)
    rescue
      e in ArgumentError -> e.message =~ "not inside a pointer"
    end
  end
end
