Code.require_file("../nx_suite/nx_suite.exs", __DIR__)

defmodule Emily.NxDoctestTest do
  @moduledoc """
  Nx's own doctests, run with Emily.Backend as the default backend: the
  oracle of the backend. The doctests it does not run are the `nx_doctests:`
  of test/nx_suite/exclusions.exs, each with its reason; they are reported
  as skipped. EMILY_NX_DOCTEST_ALL=1 runs them too, to count what the
  exclusions hide; EMILY_TEST_DEVICE=gpu runs them on the GPU.
  """
  use ExUnit.Case, async: false
  require NxSuite.DocTest

  setup do
    device = if System.get_env("EMILY_TEST_DEVICE") == "gpu", do: :gpu, else: :cpu
    previous = Nx.default_backend({Emily.Backend, device: device})
    on_exit(fn -> Nx.default_backend(previous) end)
    :ok
  end

  @exclusions if System.get_env("EMILY_NX_DOCTEST_ALL") == "1", do: %{}, else: NxSuite.Exclusions.all().nx_doctests

  NxSuite.DocTest.doctest(Nx, [], @exclusions)
  NxSuite.DocTest.doctest(Nx.LinAlg, [], @exclusions)
  NxSuite.DocTest.doctest(Nx.Random, [], @exclusions)
  NxSuite.DocTest.doctest(Nx.Constants, [], @exclusions)

  test "every exclusion names a doctest that exists" do
    modules = [Nx, Nx.LinAlg, Nx.Random, Nx.Constants, Nx.Defn.Composite]

    names =
      for module <- modules, {name, _test, _tags} <- ExUnit.DocTest.__doctests__(module, []), do: name

    # A function's key needs one of its doctests.
    exists? = fn
      name when is_binary(name) -> name in names
      key -> Enum.any?(names, &String.starts_with?(&1, NxSuite.Exclusions.function_name(key) <> " ("))
    end

    for {key, reason} <- NxSuite.Exclusions.all().nx_doctests do
      assert exists?.(key), "#{inspect(key)} (#{inspect(reason)})"
    end
  end
end
