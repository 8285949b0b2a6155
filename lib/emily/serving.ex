defmodule Emily.Serving do
  @moduledoc """
  `Nx.Serving` across BEAM nodes with Emily.

  Nx.Serving distributes by itself: a serving started under a name on
  several connected nodes joins a process group, and
  `Nx.Serving.batched_run({:distributed, name}, input)` (or a plain
  `batched_run(name, input)` on a node with no local instance) sends the
  request to one of them, weighted by `:distribution_weight`. Servings on
  `Emily.Compiler` take part unchanged; `docs/DISTRIBUTED.md` is the
  recipe.

  What this module adds is the one thing that does not cross a node: an
  `Emily.Backend` tensor holds a reference to an engine array in its node's
  memory (a NIF resource), and that reference arrives on another node as a
  plain reference with no array behind it (reading it raises an
  `ArgumentError` naming the node the array lives on). Tensors must travel
  as `Nx.BinaryBackend` tensors:

    * `portable/1` copies every `Emily.Backend` tensor inside a term to
      `Nx.BinaryBackend`: tensors and containers as `Nx.backend_copy/2`
      does, and also lists, maps, tuples and `Nx.Batch`es of them, which
      `Nx.backend_copy/2` does not take;
    * `distributed/1` makes a serving reply with portable results
      (its `distributed_postprocessing`, run on the serving's node before
      the reply leaves it; streamed events one by one);
    * `batched_run/3` sends a portable input.

  Bumblebee's servings already return `Nx.BinaryBackend` results and take
  strings, so they cross nodes as they are; `distributed/1` is for servings
  whose results are tensors computed on Emily, such as
  `Nx.Serving.jit(fun, compiler: Emily.Compiler)`.

  A node that goes down while it runs a request makes that request exit in
  the caller with `{:noconnection, {Nx.Serving, :distributed_batched_run,
  _}}` as soon as the connection is seen lost (Nx.Serving monitors the
  remote run); it is not retried, since the request may have run. Requests
  made after the node left the process group go to the remaining nodes.
  `batched_run/3` with `retries: n` runs such a request again, up to `n`
  times, on whichever node serves it then: for servings whose requests can
  safely run twice (inference).
  """

  # The caller sees the connection lost at the same moment as the process
  # group does, and the group may still list the dead node's members for a
  # moment after: a retry at once could pick one of them again.
  @retry_pause 100

  @doc """
  `term` with every `Emily.Backend` tensor in it copied to
  `Nx.BinaryBackend` (evaluated first if lazy), so that it can be sent to
  another node. Other tensors and terms are returned as they are.

  Walks tensors, `Nx.Container`s (tuples, maps, containers derived with
  `@derive Nx.Container`), lists, and the entries of an `Nx.Batch`.

  ## Examples

      iex> t = Nx.tensor([1.0, 2.0], backend: Emily.Backend)
      iex> %{result: [copy]} = Emily.Serving.portable(%{result: [t]})
      iex> copy.data.__struct__
      Nx.BinaryBackend
      iex> Nx.to_list(copy)
      [1.0, 2.0]

  """
  @spec portable(term()) :: term()
  def portable(%Nx.Tensor{data: %Emily.Backend{}} = tensor),
    do: Nx.backend_copy(tensor, Nx.BinaryBackend)

  def portable(%Nx.Tensor{} = tensor), do: tensor

  def portable(%Nx.Batch{stack: stack} = batch),
    do: %{batch | stack: Enum.map(stack, &portable_entry/1)}

  def portable(list) when is_list(list), do: Enum.map(list, &portable/1)

  def portable(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&portable/1) |> List.to_tuple()

  def portable(%module{} = struct) do
    # A struct that is an Nx container (Complex numbers, `@derive
    # Nx.Container`) is walked through its tensor fields; any other struct
    # (a Stream, a Range, a user's record) is not Emily's to take apart.
    if Nx.Container.impl_for(struct) != nil and module != Nx.Batch,
      do: Nx.Defn.Composite.traverse(struct, &portable/1),
      else: struct
  end

  def portable(map) when is_map(map), do: Map.new(map, fn {k, v} -> {k, portable(v)} end)

  def portable(other), do: other

  # An Nx.Batch entry is {thunks, size}: one zero-arity function per tensor
  # of the batch's template, returning that tensor with its batch axis. Each
  # is run here and replaced by Nx's own thunk around the copy (the one
  # Nx.LazyContainer gives a tensor), so the batch still evaluates on a node
  # that has Nx but not Emily.
  defp portable_entry({thunks, size}) do
    thunks =
      Enum.map(thunks, fn thunk ->
        tensor = portable(thunk.())
        {_template, [thunk]} = Nx.LazyContainer.traverse(tensor, [], &{&1, [&2 | &3]})
        thunk
      end)

    {thunks, size}
  end

  @doc """
  `serving` with a `distributed_postprocessing` that makes its results
  portable (see `portable/1`) after the one it already has: a remote
  caller then receives `Nx.BinaryBackend` tensors. For a streaming serving,
  each event is made portable as it is sent.

  ## Examples

      serving =
        Nx.Serving.jit(&MyModel.predict/1, compiler: Emily.Compiler)
        |> Emily.Serving.distributed()

      # on every serving node, under the same name:
      {Nx.Serving, serving: serving, name: MyServing, batch_size: 8}

  """
  @spec distributed(Nx.Serving.t()) :: Nx.Serving.t()
  def distributed(
        %Nx.Serving{distributed_postprocessing: previous, streaming: streaming} = serving
      ) do
    post =
      if streaming,
        do: fn result -> result |> previous.() |> Stream.map(&portable/1) end,
        else: fn result -> result |> previous.() |> portable() end

    Nx.Serving.distributed_postprocessing(serving, post)
  end

  @doc """
  `Nx.Serving.batched_run/3` with `input` made portable before it is sent
  to a remote serving (a local serving gets it as it is).

  Options:

    * `:preprocessing` - a `distributed_preprocessing` function to run
      before `portable/1` (default: none);
    * `:retries` - how many times to run the request again, after a pause
      of #{@retry_pause} ms, when the node that ran it went down before
      replying (`:noconnection`); default `0`, Nx.Serving's behaviour.
  """
  @spec batched_run(atom() | {:local, atom()} | {:distributed, atom()}, term(), keyword()) ::
          term()
  def batched_run(name, input, opts \\ []) do
    opts = Keyword.validate!(opts, preprocessing: &Function.identity/1, retries: 0)
    preprocessing = opts[:preprocessing]
    run(name, input, fn input -> input |> preprocessing.() |> portable() end, opts[:retries])
  end

  defp run(name, input, preprocessing, retries) do
    Nx.Serving.batched_run(name, input, preprocessing)
  catch
    :exit, {:noconnection, {Nx.Serving, _, _}} when retries > 0 ->
      Process.sleep(@retry_pause)
      run(name, input, preprocessing, retries - 1)
  end
end
