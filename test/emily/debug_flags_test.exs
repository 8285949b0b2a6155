defmodule Emily.DebugFlagsTest do
  # Compiles a module under temporarily changed application env: run alone.
  use ExUnit.Case, async: false

  import EmilyTest.Helpers
  alias Emily.Native

  @checked [gather: 3, take: 3, take_along_axis: 3, indexed_add: 4, indexed_put: 4, matmul: 2]

  defp imports(beam) do
    {:ok, {_, [imports: imports]}} = :beam_lib.chunks(beam, [:imports])
    imports
  end

  # The Emily module's source compiled again, as EmilyDebugOn, with both
  # flags on. Compiled once per test run.
  defp debug_on_module do
    case :persistent_term.get({__MODULE__, :module}, nil) do
      nil ->
        source =
          Path.expand("../../lib/emily.ex", __DIR__)
          |> File.read!()
          |> String.replace("defmodule Emily do", "defmodule EmilyDebugOn do", global: false)

        previous = Application.get_all_env(:emily)
        Application.put_env(:emily, :debug_bounds_check, true)
        Application.put_env(:emily, :debug_detect_nan_inf, true)

        compiled =
          try do
            Code.compile_string(source, "lib/emily.ex (flags on)")
          after
            for key <- [:debug_bounds_check, :debug_detect_nan_inf] do
              Application.put_env(:emily, key, Keyword.get(previous, key, false))
            end
          end

        [{EmilyDebugOn, beam}] = compiled
        :persistent_term.put({__MODULE__, :module}, {EmilyDebugOn, beam})
        {EmilyDebugOn, beam}

      found ->
        found
    end
  end

  test "with the flags off (this build), Emily never calls the checks" do
    refute Application.get_env(:emily, :debug_bounds_check)
    refute Application.get_env(:emily, :debug_detect_nan_inf)
    beam = :code.which(Emily)
    called = imports(beam) |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
    refute Emily.Debug in called
    refute Enum.any?(imports(beam), &match?({Emily.Native, :indices_in_range, _}, &1))
    refute Enum.any?(imports(beam), &match?({Emily.Native, :is_nan, _}, &1))

    # And the unchecked ops do not validate indices (the engine clamps).
    t = Native.iota([3], 0, {:s, 32})
    assert values(Emily.take(t, tensor([5], {:s, 32}), 0)) |> length() == 1
  end

  test "with the flags on, the checked ops call the checks" do
    {mod, beam} = debug_on_module()
    called = imports(beam)
    assert {Emily.Debug, :check_indices!, 4} in called
    assert {Emily.Debug, :check_index_rows!, 4} in called
    assert {Emily.Debug, :check_finite!, 2} in called

    for {fun, arity} <- @checked, do: assert(function_exported?(mod, fun, arity))
  end

  test "bounds checks raise on out-of-range and negative indices" do
    {mod, _} = debug_on_module()
    t = Native.iota([3, 2], 0, {:f, 32})

    assert values(mod.take(t, tensor([2, 0], {:s, 32}), 0)) == [2.0, 2.0, 0.0, 0.0]

    assert_raise ArgumentError, "take: index 3 on axis 0 is out of range (dim=3)", fn ->
      mod.take(t, tensor([0, 3], {:s, 32}), 0)
    end

    assert_raise ArgumentError, "take: index -1 on axis 1 is negative (dim=2)", fn ->
      mod.take(t, tensor([-1], {:s, 64}), -1)
    end

    assert_raise ArgumentError,
                 ~r/take_along_axis: index 2 on axis 1 is out of range \(dim=2\)/,
                 fn ->
                   mod.take_along_axis(t, tensor([0, 1, 2, 0, 0, 0], {:s, 32}, [3, 2]), 1)
                 end

    # gather: column j addresses axes[j], each with its own bound.
    assert values(mod.gather(t, tensor([2, 1], {:s, 32}, [1, 2]), [0, 1])) == [2.0]

    assert_raise ArgumentError, "gather: index 2 on axis 1 is out of range (dim=2)", fn ->
      mod.gather(t, tensor([2, 2], {:s, 32}, [1, 2]), [0, 1])
    end

    z = Native.full(scalar(0, {:s, 32}), [3], {:s, 32})
    upd = tensor([1], {:s, 32})
    assert values(mod.indexed_add(z, tensor([2], {:s, 32}, [1, 1]), upd, [])) == [0, 0, 1]

    assert_raise ArgumentError, "indexed_add: index 3 on axis 0 is out of range (dim=3)", fn ->
      mod.indexed_add(z, tensor([3], {:s, 32}, [1, 1]), upd, [])
    end

    assert_raise ArgumentError, "indexed_put: index -2 on axis 0 is negative (dim=3)", fn ->
      mod.indexed_put(z, tensor([-2], {:s, 32}, [1, 1]), upd, [0])
    end

    # Empty index tensors are in range.
    assert Native.shape(mod.take(t, Emily.from_binary(<<>>, [0], {:s, 32}), 0)) == [0, 2]
  end

  test "NaN/Inf detection on matmul" do
    {mod, _} = debug_on_module()
    a = tensor([1.0, 2.0], {:f, 32}, [1, 2])
    b = tensor([3.0, 4.0], {:f, 32}, [2, 1])
    assert values(mod.matmul(a, b)) == [11.0]

    bad = Emily.from_binary(<<0x7FC00000::32-native, 0::32>>, [2, 1], {:f, 32})
    assert_raise ArgumentError, "matmul: produced NaN or Inf", fn -> mod.matmul(a, bad) end

    huge = tensor([3.0e38, 3.0e38], {:f, 32}, [2, 1])
    assert_raise ArgumentError, "matmul: produced NaN or Inf", fn -> mod.matmul(a, huge) end

    # Integer results cannot hold NaN: nothing to scan.
    i = tensor([1, 2], {:s, 32}, [1, 2])
    assert values(mod.matmul(i, tensor([1, 1], {:s, 32}, [2, 1]))) == [3]
  end

  # Emily itself recompiled with both flags on for the duration of `fun`,
  # then its own object code restored. This module is not async, so no
  # other test runs meanwhile.
  defp with_flags_on(fun) do
    {Emily, beam, path} = :code.get_object_code(Emily)
    source = File.read!(Path.expand("../../lib/emily.ex", __DIR__))
    previous = Application.get_all_env(:emily)
    ignore = Code.get_compiler_option(:ignore_module_conflict)
    Code.put_compiler_option(:ignore_module_conflict, true)

    try do
      Application.put_env(:emily, :debug_bounds_check, true)
      Application.put_env(:emily, :debug_detect_nan_inf, true)
      Code.compile_string(source, "lib/emily.ex (flags on)")

      for key <- [:debug_bounds_check, :debug_detect_nan_inf],
          do: Application.put_env(:emily, key, Keyword.get(previous, key, false))

      fun.()
    after
      for key <- [:debug_bounds_check, :debug_detect_nan_inf],
          do: Application.put_env(:emily, key, Keyword.get(previous, key, false))

      :code.purge(Emily)
      {:module, Emily} = :code.load_binary(Emily, path, beam)
      Code.put_compiler_option(:ignore_module_conflict, ignore)
    end
  end

  test "through Emily.Backend: Nx's indexing ops and dot run the checks when the flags are on" do
    t = Nx.iota({3, 2}, type: :f32, backend: Emily.Backend)
    idx = fn list -> Nx.tensor(list, type: :s32, backend: Emily.Backend) end

    with_flags_on(fn ->
      assert Nx.to_flat_list(Nx.take(t, idx.([2, 0]))) == [4.0, 5.0, 0.0, 1.0]

      assert_raise ArgumentError, ~r/index 3 on axis 0 is out of range/, fn ->
        Nx.take(t, idx.([0, 3]))
      end

      assert_raise ArgumentError, ~r/out of range|negative/, fn ->
        Nx.take_along_axis(t, idx.([[0, 2], [0, 0], [1, 1]]), axis: 1)
      end

      assert_raise ArgumentError, ~r/gather: index 2 on axis 1 is out of range/, fn ->
        Nx.gather(t, idx.([[2, 2]]))
      end

      z = Nx.broadcast(Nx.tensor(0, type: :s32, backend: Emily.Backend), {3})
      upd = idx.([1])
      assert Nx.to_list(Nx.indexed_add(z, idx.([[2]]), upd)) == [0, 0, 1]

      assert_raise ArgumentError, ~r/indexed_add: index 3/, fn ->
        Nx.indexed_add(z, idx.([[3]]), upd)
      end

      assert_raise ArgumentError, ~r/indexed_put: index -2/, fn ->
        Nx.indexed_put(z, idx.([[-2]]), upd)
      end

      a = Nx.tensor([[1.0, 2.0]], backend: Emily.Backend)

      assert Nx.to_flat_list(Nx.dot(a, Nx.tensor([[3.0], [4.0]], backend: Emily.Backend))) == [
               11.0
             ]

      bad = Nx.tensor([[:nan], [0.0]], backend: Emily.Backend)
      assert_raise ArgumentError, "dot: produced NaN or Inf", fn -> Nx.dot(a, bad) end
    end)

    # Restored: the unchecked build clamps and lets NaN through.
    assert Nx.to_flat_list(Nx.take(t, idx.([3]))) |> length() == 2
    a = Nx.tensor([[1.0, 2.0]], backend: Emily.Backend)
    assert [nan] = Nx.to_flat_list(Nx.dot(a, Nx.tensor([[:nan], [0.0]], backend: Emily.Backend)))
    assert nan == :nan
  end
end
