defmodule Tokenizers.MixProject do
  use Mix.Project

  # A pure-Elixir implementation of the part of Hugging Face's `tokenizers`
  # that Bumblebee uses (the `tokenizers` Hex package is a Rust NIF). It has
  # no dependencies: `tokenizer.json` is read with Elixir's own JSON module.
  def project do
    [
      app: :tokenizers,
      version: "0.5.1",
      elixir: "~> 1.18",
      start_permanent: Mix.env() == :prod,
      deps: []
    ]
  end

  def application do
    [extra_applications: []]
  end
end
