defmodule Emily.Compiler.DefnTest.Fns do
  @moduledoc false
  import Nx.Defn

  defn(elementwise(a, b), do: Nx.exp(a) * b - Nx.tanh(a / (b + 3)) + 1)
  defn(mixed_types(a, i), do: a * i + Nx.as_type(i, :f32) / 2)

  defn(reductions(a),
    do: {Nx.sum(a, axes: [1]), Nx.reduce_max(a), Nx.mean(a, axes: [0], keep_axes: true)}
  )

  defn(softmax(a),
    do:
      Nx.exp(a - Nx.reduce_max(a, axes: [-1], keep_axes: true))
      |> then(&(&1 / Nx.sum(&1, axes: [-1], keep_axes: true)))
  )

  defn(matmul(a, b), do: Nx.dot(a, b) |> Nx.transpose() |> Nx.reshape({6}))

  defn(shapes(a),
    do: a |> Nx.reshape({3, 2}) |> Nx.broadcast({4, 3, 2}) |> Nx.slice([1, 0, 0], [2, 3, 2])
  )

  defn(constants(a), do: a + Nx.tensor([10.0, 20.0, 30.0, 40.0]) + Nx.iota({4}))
  defn(comparisons(a, b), do: Nx.select(a > b, a, b) + Nx.as_type(a == b, :f32))

  defn count_up(x) do
    {_i, x} =
      while {i = 0, x}, i < 5 do
        {i + 1, x * 2}
      end

    x
  end

  defn data_dependent_loop(x) do
    while x, Nx.sum(x) < 100 do
      x * 3
    end
  end

  defn nested_loops(x) do
    {_i, x} =
      while {i = 0, x}, i < 3 do
        {_j, x} =
          while {j = 0, x}, j < 2 do
            {j + 1, x + 1}
          end

        {i + 1, x * 2}
      end

    x
  end

  defn branch(x) do
    if Nx.sum(x) > 0 do
      x * 2
    else
      x - 100
    end
  end

  defn multi_branch(x, y) do
    cond do
      Nx.sum(x) > 10 -> {x * 2, y}
      Nx.sum(x) > 0 -> {x + 1, y * 2}
      true -> {x - 1, y + 3}
    end
  end

  defn containers(%{a: a, b: {b, c}}) do
    %{sum: a + b, pair: {b * c, Nx.sum(c)}}
  end

  defn(loss(w, x), do: Nx.sum(Nx.tanh(Nx.dot(x, w)) ** 2))
  defn(grad_of_loss(w, x), do: grad(w, &loss(&1, x)))
  defn(value_and_grad_of_loss(w, x), do: value_and_grad(w, &loss(&1, x)))

  defn(stop(x), do: grad(x, fn x -> Nx.sum(x * stop_grad(x)) end))

  defn(random_normal(key), do: Nx.Random.normal(key, shape: {3, 4}))
  defn(random_split(key), do: Nx.Random.split(key) |> then(&Nx.Random.uniform(&1[0], shape: {5})))

  defn(custom_reduce(x), do: Nx.reduce(x, 1, [axes: [1]], fn a, b -> a * b end))
  defn(generic_reduce(x), do: Nx.reduce(x, 0, fn a, b -> Nx.max(a, b) + 1 end))

  defn hooked(x) do
    y = hook(x * 2, :doubled)
    y + 1
  end

  defn hooked_in_branch(x) do
    if Nx.sum(x) > 0 do
      hook(x + 1, :positive)
    else
      hook(x - 1, :negative)
    end
  end

  defn(printed(x), do: print_value(x * 3, label: "emily") + 1)

  # A counting loop that hooks its counter (and, on even steps only, the
  # square) each iteration: one engine program with taps.
  defn hooked_loop(n) do
    n = hook(n, :start)

    {_i, acc, _n} =
      while {i = 0, acc = 0, n}, i < n do
        i = hook(i + 1, :step)
        sq = if rem(i, 2) == 0, do: hook(i * i, :even_square), else: 0
        {i, acc + sq, n}
      end

    hook(acc, :total)
  end

  # A loop in a loop, each with its hook.
  defn nested_hooked_loops(n) do
    {_, count, _n} =
      while {i = 0, count = 0, n}, i < n do
        {_, inner} =
          while {j = 0, inner = count}, j < 2 do
            {hook(j + 1, :inner), inner + 1}
          end

        {hook(i + 1, :outer), inner, n}
      end

    count
  end

  defn hooked_loop_with_callback(n) do
    {i, _n} =
      while {i = 0, n}, i < n do
        {hook(i + 1, &send_to_test/1), n}
      end

    i
  end

  def send_to_test(value), do: send(:emily_defn_hook_test, {:callback, Nx.to_number(value)})

  # The loop sits in a cond clause: its hooks must fire only when the clause
  # is taken, which one program (every clause computed) cannot promise.
  defn hooked_loop_in_branch(flag, n) do
    if flag do
      {i, _n} =
        while {i = 0, n}, i < n do
          {hook(i + 1, :branch_step), n}
        end

      i
    else
      n
    end
  end

  # The hooked value is first reached inside the cond clause (the left
  # operand), then outside it: the hook fires whichever clause is taken.
  defn hooked_before_cond(bool, x) do
    res = hook(x + 1, :shared)
    branch = if bool, do: res, else: 0
    branch * res
  end

  # The same hooked node reached from both clauses: it fires once.
  defn hooked_in_both_clauses(bool, x) do
    res = hook(x * 2, :both) + 1
    if bool, do: res, else: -res
  end

  deftransformp nested_forced(x) do
    Nx.Defn.jit(&Nx.multiply/2, compiler: Emily.Compiler, on_conflict: :force).(x, x)
  end

  defn(with_nested_jit(y), do: y + nested_forced(Nx.tensor(3.0, backend: Nx.BinaryBackend)))

  # What the deprecated create_token/hook_token/attach_token expand to.
  def token_hook(x) do
    {token, _} = Nx.Defn.Expr.add_hook(Nx.Defn.Token.new(), Nx.add(x, 5), :plus_five, nil)
    Nx.Defn.Expr.attach_token(token, Nx.multiply(x, 2))
  end

  defn runtime(x) do
    Nx.runtime_call(x, x, [], &plus_one/2) * 2
  end

  def plus_one(t, _opts), do: Nx.add(t, 1)
end

defmodule Emily.Compiler.DefnTest do
  use ExUnit.Case, async: false
  doctest Emily.Compiler

  alias Emily.Compiler.DefnTest.Fns

  # The oracle: Nx.Defn.Evaluator on Nx.BinaryBackend inputs.
  defp oracle(fun, args), do: apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), binary(args))

  defp emily(fun, args, opts \\ []),
    do: apply(Nx.Defn.jit(fun, [compiler: Emily.Compiler] ++ opts), to_emily(args))

  defp binary(args), do: Enum.map(args, &transfer(&1, Nx.BinaryBackend))
  defp to_emily(args), do: Enum.map(args, &transfer(&1, Emily.Backend))

  defp transfer(container, backend) do
    Nx.Defn.Composite.traverse(container, &Nx.backend_copy(&1, backend))
  end

  defp assert_same(fun, args, opts \\ []) do
    expected = oracle(fun, args)
    got = emily(fun, args, opts)
    assert_close(got, expected)
    got
  end

  defp assert_close(got, expected) do
    got_leaves = Nx.Defn.Composite.flatten_list([got])
    expected_leaves = Nx.Defn.Composite.flatten_list([expected])
    assert length(got_leaves) == length(expected_leaves)

    for {g, e} <- Enum.zip(got_leaves, expected_leaves) do
      assert g.shape == e.shape
      assert g.type == e.type
      assert %Emily.Backend{} = g.data

      assert g.vectorized_axes == e.vectorized_axes
      g = g |> Nx.devectorize() |> Nx.backend_copy(Nx.BinaryBackend)
      e = Nx.devectorize(e)

      assert Nx.to_number(Nx.all_close(g, e, rtol: 1.0e-5, atol: 1.0e-6)) == 1,
             "expected #{inspect(e)}, got #{inspect(g)}"
    end
  end

  setup do
    Emily.Compiler.clear_cache()
    :ok
  end

  defp f32(shape, seed \\ 0) do
    key = Nx.Random.key(seed)
    {t, _} = Nx.Random.uniform(key, -2.0, 2.0, shape: shape, type: :f32)
    Nx.backend_copy(t, Nx.BinaryBackend)
  end

  describe "against Nx.Defn.Evaluator" do
    test "elementwise and mixed types" do
      assert_same(&Fns.elementwise/2, [f32({4}), f32({4}, 1)])
      assert_same(&Fns.mixed_types/2, [f32({2, 3}), Nx.iota({2, 3})])
      assert_same(&Fns.comparisons/2, [f32({5}), f32({5}, 2)])
    end

    test "reductions, softmax, dot, shape ops, captured constants" do
      assert_same(&Fns.reductions/1, [f32({3, 4})])
      assert_same(&Fns.softmax/1, [f32({2, 5})])
      assert_same(&Fns.matmul/2, [f32({2, 4}), f32({4, 3}, 1)])
      assert_same(&Fns.shapes/1, [f32({6})])
      assert_same(&Fns.constants/1, [f32({4})])
    end

    test "while: counted, data dependent, nested" do
      assert_same(&Fns.count_up/1, [f32({3})])
      assert_same(&Fns.data_dependent_loop/1, [Nx.tensor([1.0, 2.0])])
      assert_same(&Fns.nested_loops/1, [f32({2})])
    end

    test "cond: both ways, several clauses, tuples" do
      assert_same(&Fns.branch/1, [Nx.tensor([1.0, 2.0])])
      assert_same(&Fns.branch/1, [Nx.tensor([-1.0, -2.0])])

      for x <- [[5.0, 6.0], [1.0, 2.0], [-1.0, -2.0]] do
        assert_same(&Fns.multi_branch/2, [Nx.tensor(x), Nx.tensor([1, 2])])
      end
    end

    test "containers in and out" do
      arg = %{a: f32({2}), b: {f32({2}, 1), f32({2}, 2)}}
      got = assert_same(&Fns.containers/1, [arg])
      assert %{sum: _, pair: {_, _}} = got
    end

    test "grad and value_and_grad" do
      assert_same(&Fns.grad_of_loss/2, [f32({3, 2}), f32({4, 3}, 1)])
      assert_same(&Fns.value_and_grad_of_loss/2, [f32({3, 2}), f32({4, 3}, 1)])
      assert_same(&Fns.stop/1, [f32({3})])
    end

    test "Nx.Random" do
      assert_same(&Fns.random_normal/1, [Nx.Random.key(42)])
      assert_same(&Fns.random_split/1, [Nx.Random.key(7)])
    end

    test "reduce with a function" do
      assert_same(&Fns.custom_reduce/1, [f32({2, 3})])
      assert_same(&Fns.generic_reduce/1, [Nx.tensor([[1, 5], [2, 0]])])
    end

    test "vectorized arguments" do
      x = Nx.vectorize(f32({3, 4}), :rows)
      got = assert_same(&Fns.softmax/1, [x])
      assert got.vectorized_axes == [rows: 3]
    end

    test "non-tensor arguments are part of the cache key" do
      fun = fn x, opts -> Nx.multiply(x, opts[:factor]) end
      jit = Nx.Defn.jit(fun, compiler: Emily.Compiler)
      x = Nx.tensor([1.0, 2.0], backend: Emily.Backend)
      assert Nx.to_flat_list(jit.(x, factor: 2)) == [2.0, 4.0]
      assert Nx.to_flat_list(jit.(x, factor: 3)) == [3.0, 6.0]
    end
  end

  describe "hooks" do
    test "run after the program with the computed value" do
      parent = self()

      jit =
        Nx.Defn.jit(&Fns.hooked/1,
          compiler: Emily.Compiler,
          hooks: %{doubled: &send(parent, {:doubled, &1})}
        )

      result = jit.(Nx.tensor([1.0, 2.0]))
      assert Nx.to_flat_list(result) == [3.0, 5.0]
      assert_received {:doubled, value}
      assert Nx.to_flat_list(value) == [2.0, 4.0]

      # The override is read at each call, the program is reused.
      jit =
        Nx.Defn.jit(&Fns.hooked/1,
          compiler: Emily.Compiler,
          hooks: %{doubled: &send(parent, {:again, &1})}
        )

      _ = jit.(Nx.tensor([1.0, 2.0]))
      assert_received {:again, _}
      assert Emily.Compiler.cache_info().hits == 1
    end

    test "in cond clauses fire only for the clause taken" do
      parent = self()

      hooks = %{
        positive: &send(parent, {:positive, &1}),
        negative: &send(parent, {:negative, &1})
      }

      jit = Nx.Defn.jit(&Fns.hooked_in_branch/1, compiler: Emily.Compiler, hooks: hooks)

      assert Nx.to_flat_list(jit.(Nx.tensor([1.0]))) == [2.0]
      assert_received {:positive, _}
      refute_received {:negative, _}

      assert Nx.to_flat_list(jit.(Nx.tensor([-1.0]))) == [-2.0]
      assert_received {:negative, _}
      refute_received {:positive, _}
    end

    test "a hooked node shared by a cond clause and the code outside fires on every call" do
      parent = self()

      jit =
        Nx.Defn.jit(&Fns.hooked_before_cond/2,
          compiler: Emily.Compiler,
          hooks: %{shared: &send(parent, {:shared, &1})}
        )

      for {bool, expected} <- [{0, 0.0}, {1, 9.0}] do
        assert Nx.to_number(jit.(bool, Nx.tensor(2.0))) == expected
        assert_received {:shared, value}
        assert Nx.to_number(value) == 3.0
        refute_received {:shared, _}
      end

      both =
        Nx.Defn.jit(&Fns.hooked_in_both_clauses/2,
          compiler: Emily.Compiler,
          hooks: %{both: &send(parent, {:both, &1})}
        )

      for {bool, expected} <- [{0, -5.0}, {1, 5.0}] do
        assert Nx.to_number(both.(bool, Nx.tensor(2.0))) == expected
        assert_received {:both, _}
        refute_received {:both, _}
      end
    end

    test "token hooks and print_value" do
      parent = self()

      jit =
        Nx.Defn.jit(&Fns.token_hook/1,
          compiler: Emily.Compiler,
          hooks: %{plus_five: &send(parent, {:plus_five, &1})}
        )

      assert Nx.to_flat_list(jit.(Nx.tensor([1.0]))) == [2.0]
      assert_received {:plus_five, value}
      assert Nx.to_flat_list(value) == [6.0]

      output =
        ExUnit.CaptureIO.capture_io(fn ->
          result = Nx.Defn.jit(&Fns.printed/1, compiler: Emily.Compiler).(Nx.tensor([1.0]))
          assert Nx.to_flat_list(result) == [4.0]
        end)

      assert output =~ "emily"
      assert output =~ "3.0"
    end
  end

  describe "hooks inside while" do
    setup do
      handler = attach([:emily, :defn, :compile])
      on_exit(fn -> :telemetry.detach(handler) end)
      :ok
    end

    test "fire once per iteration, in order, from one program" do
      parent = self()

      hooks = %{
        start: &send(parent, {:start, Nx.to_number(&1)}),
        step: &send(parent, {:step, Nx.to_number(&1)}),
        even_square: &send(parent, {:even_square, Nx.to_number(&1)}),
        total: &send(parent, {:total, Nx.to_number(&1)})
      }

      expected = [
        {:start, 5},
        {:step, 1},
        {:step, 2},
        {:even_square, 4},
        {:step, 3},
        {:step, 4},
        {:even_square, 16},
        {:step, 5},
        {:total, 20}
      ]

      jit = Nx.Defn.jit(&Fns.hooked_loop/1, compiler: Emily.Compiler, hooks: hooks)
      assert Nx.to_number(jit.(Nx.tensor(5))) == 4 + 16
      assert_received {:event, _, %{mode: :program, hooks: 4}}
      assert collect_messages() == expected

      # The Evaluator calls them identically.
      Nx.Defn.jit(&Fns.hooked_loop/1, compiler: Nx.Defn.Evaluator, hooks: hooks).(Nx.tensor(5))
      assert collect_messages() == expected

      # A second call replays the cached program and fires again.
      assert Nx.to_number(jit.(Nx.tensor(2))) == 4

      assert collect_messages() == [
               {:start, 2},
               {:step, 1},
               {:step, 2},
               {:even_square, 4},
               {:total, 4}
             ]
    end

    test "named hooks without an override or a callback are dropped" do
      jit = Nx.Defn.jit(&Fns.hooked_loop/1, compiler: Emily.Compiler)
      assert Nx.to_number(jit.(Nx.tensor(4))) == 20
      assert_received {:event, _, %{mode: :program, hooks: 0}}
      assert collect_messages() == []
    end

    test "nested loops tap their own hooks" do
      parent = self()

      hooks = %{
        inner: &send(parent, {:inner, Nx.to_number(&1)}),
        outer: &send(parent, {:outer, Nx.to_number(&1)})
      }

      jit = Nx.Defn.jit(&Fns.nested_hooked_loops/1, compiler: Emily.Compiler, hooks: hooks)
      assert Nx.to_number(jit.(Nx.tensor(2))) == 4
      assert_received {:event, _, %{mode: :program}}

      assert collect_messages() == [
               {:inner, 1},
               {:inner, 2},
               {:outer, 1},
               {:inner, 1},
               {:inner, 2},
               {:outer, 2}
             ]
    end

    test "a hook's own callback is called in the calling process" do
      Process.register(self(), :emily_defn_hook_test)

      try do
        jit = Nx.Defn.jit(&Fns.hooked_loop_with_callback/1, compiler: Emily.Compiler)
        assert Nx.to_number(jit.(Nx.tensor(3))) == 3
        assert collect_messages() == [{:callback, 1}, {:callback, 2}, {:callback, 3}]
      after
        Process.unregister(:emily_defn_hook_test)
      end
    end

    test "a hook that raises stops the call with its error, and the next call works" do
      hooks = %{step: fn v -> if Nx.to_number(v) == 2, do: raise("stop at 2") end}
      jit = Nx.Defn.jit(&Fns.hooked_loop/1, compiler: Emily.Compiler, hooks: hooks)
      assert_raise RuntimeError, "stop at 2", fn -> jit.(Nx.tensor(5)) end

      parent = self()

      jit =
        Nx.Defn.jit(&Fns.hooked_loop/1,
          compiler: Emily.Compiler,
          hooks: %{step: &send(parent, {:step, Nx.to_number(&1)})}
        )

      assert Nx.to_number(jit.(Nx.tensor(1))) == 0
      assert collect_messages() == [{:step, 1}]
    end

    test "a hooked loop inside a cond clause runs on the Evaluator" do
      parent = self()

      jit =
        Nx.Defn.jit(&Fns.hooked_loop_in_branch/2,
          compiler: Emily.Compiler,
          hooks: %{branch_step: &send(parent, {:b, Nx.to_number(&1)})}
        )

      assert Nx.to_number(jit.(Nx.tensor(0, type: :u8), Nx.tensor(3))) == 3

      assert_received {:event, _,
                       %{mode: :evaluator, reason: "a while loop with hooks inside a cond clause"}}

      assert collect_messages() == []
      assert Nx.to_number(jit.(Nx.tensor(1, type: :u8), Nx.tensor(2))) == 2
      assert collect_messages() == [{:b, 1}, {:b, 2}]
    end
  end

  defp collect_messages(acc \\ []) do
    receive do
      {:event, _, _} -> collect_messages(acc)
      message -> collect_messages([message | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  test "runtime_call falls back to the Evaluator on Emily.Backend" do
    handler = attach([:emily, :defn, :compile])
    got = assert_same(&Fns.runtime/1, [Nx.tensor([1.0, 2.0])])
    assert Nx.to_flat_list(got) == [4.0, 6.0]
    assert_received {:event, _, %{mode: :evaluator}}
    :telemetry.detach(handler)
  end

  test "only the arguments of parameters the function reads are asked for" do
    parent = self()
    # Nx passes each argument as a thunk (a lazy container's fields are
    # such thunks, computed only when asked for): the compiler is called as
    # Nx.Defn.jit calls it.
    vars = for i <- 0..2, do: Nx.Defn.Expr.parameter(Nx.template({1}, :f32), :root, i)
    thunk = fn v -> fn -> send(parent, {:asked, v}) && Nx.tensor([v * 1.0]) end end

    [result] =
      Emily.Compiler.__jit__(
        make_ref(),
        vars,
        fn [x, _y, z] -> Nx.add(x, z) end,
        [Enum.map(1..3, thunk)],
        []
      )

    assert Nx.to_flat_list(result) == [4.0]
    assert_received {:asked, 1}
    refute_received {:asked, 2}
    assert_received {:asked, 3}
  end

  test "a jit forced inside another's trace returns tensors the trace can embed" do
    assert Nx.to_number(
             Nx.Defn.jit(&Fns.with_nested_jit/1, compiler: Emily.Compiler).(Nx.tensor(1.0))
           ) == 10.0
  end

  describe "cache" do
    test "a second call with the same template replays without tracing" do
      handler = attach([:emily, :defn, :compile])
      parent = self()
      traced = fn a, b -> send(parent, :traced) && Nx.add(Nx.multiply(a, b), 1) end
      jit = Nx.Defn.jit(traced, compiler: Emily.Compiler)
      a = Nx.tensor([1.0, 2.0], backend: Emily.Backend)

      _ = jit.(a, a)
      assert_received :traced
      assert_received {:event, _, %{mode: :program}}
      assert Nx.to_flat_list(jit.(Nx.add(a, 1), a)) == [3.0, 7.0]
      refute_received :traced
      refute_received {:event, _, _}
      assert %{hits: 1, misses: 1, entries: 1} = Emily.Compiler.cache_info()

      # Another shape, type or option is another program.
      _ = jit.(Nx.tensor([1.0, 2.0, 3.0]), Nx.tensor([1.0, 2.0, 3.0]))
      _ = jit.(Nx.tensor([1, 2]), Nx.tensor([1, 2]))
      _ = Nx.Defn.jit(traced, compiler: Emily.Compiler, fuse: false).(a, a)
      assert %{misses: 4, entries: 4} = Emily.Compiler.cache_info()
      :telemetry.detach(handler)
    end

    test "Nx.Defn.compile traces once" do
      compiled =
        Nx.Defn.compile(&Fns.elementwise/2, [Nx.template({3}, :f32), Nx.template({3}, :f32)],
          compiler: Emily.Compiler
        )

      x = Nx.tensor([1.0, 2.0, 3.0])

      for _ <- 1..3 do
        assert_close(compiled.(x, x), oracle(&Fns.elementwise/2, [x, x]))
      end

      assert %{misses: 1} = Emily.Compiler.cache_info()
    end
  end

  describe "fusion" do
    test "fuse: false is bit-identical to eager Emily.Backend; fuse: true is close" do
      args = [f32({64, 33}), f32({64, 33}, 3)]
      fun = fn a, b -> Fns.softmax(Fns.elementwise(a, b)) end
      eager = apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), to_emily(args))
      unfused = emily(fun, args, fuse: false)
      fused = emily(fun, args)
      assert Nx.to_binary(unfused) == Nx.to_binary(eager)
      assert_close(fused, Nx.backend_copy(eager, Nx.BinaryBackend))
    end
  end

  test "__to_backend__ and __partitions_options__" do
    assert Emily.Compiler.__to_backend__([]) == {Emily.Backend, device: :cpu}
    assert Nx.Defn.to_backend(compiler: Emily.Compiler) == {Emily.Backend, device: :cpu}
    assert Emily.Compiler.__partitions_options__(fuse: true) == [[fuse: true]]
    assert length(Emily.Compiler.__partitions_options__(max_concurrency: 2)) == 2
  end

  test "tensors of other backends are copied in; results are Emily tensors" do
    result =
      Nx.Defn.jit(&Fns.elementwise/2, compiler: Emily.Compiler).(
        Nx.tensor([1.0]),
        Nx.tensor([2.0])
      )

    assert %Emily.Backend{} = result.data
  end

  def forward(_event, measurements, metadata, parent),
    do: send(parent, {:event, measurements, metadata})

  defp attach(event) do
    id = make_ref()
    :telemetry.attach(id, event, &__MODULE__.forward/4, self())
    id
  end

  test "the device defaults to the default backend's (GPU programs need no :device)" do
    previous = Nx.default_backend({Emily.Backend, device: :gpu})

    try do
      assert Emily.Compiler.__to_backend__([]) == {Emily.Backend, device: :gpu}
      assert Emily.Compiler.__to_backend__(device: :cpu) == {Emily.Backend, device: :cpu}
      Nx.default_backend(Nx.BinaryBackend)
      assert Emily.Compiler.__to_backend__([]) == {Emily.Backend, device: :cpu}
    after
      Nx.default_backend(previous)
    end
  end
end
