"""``tempo method add | list | remove``: the registry of third-party methods (``ARCHIVE/methods.yaml``)."""
from __future__ import annotations

import argparse


def _archive(args) -> str:
    from tempo_assets.resources import default_archive_root

    return args.archive or default_archive_root()


def _register_partition(key: str) -> str:
    """Add the ``methods`` partition key to the Dagster instance (``$DAGSTER_HOME``)."""
    import dagster as dg

    from tempo_assets.cli.graph_cmd import ensure_dagster_home
    from tempo_assets.partitions import METHODS

    ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    if key not in set(instance.get_dynamic_partitions(METHODS.name)):
        instance.add_dynamic_partitions(METHODS.name, [key])
    return METHODS.name


def _add(args) -> int:
    import pydantic

    from tempo_assets.core.base.dates import parse_date
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.methods.registry import MethodSpec, add_method
    from tempo_assets.assets.methods import hidden_paths
    from tempo_assets.resources import default_artefacts_root

    if bool(args.dir) == bool(args.predictions):
        raise TempoInputError("give either --dir DIR --command CMD or --predictions DIR --produced-at DATE")
    fields = {"name": args.name, "version": args.version}
    if args.dir:
        if not args.command or args.produced_at:
            raise TempoInputError("--dir needs --command (and takes no --produced-at)")
        fields.update(kind="command", dir=args.dir, command=args.command,
                      trained_until=parse_date(args.trained_until) if args.trained_until else None)
        if args.timeout is not None:
            fields["timeout_s"] = args.timeout
        if args.memory_gb is not None:
            fields["memory_gb"] = args.memory_gb
    else:
        if not args.produced_at or args.command or args.trained_until:
            raise TempoInputError("--predictions needs --produced-at (its date bounds training; no --command, "
                                  "no --trained-until)")
        fields.update(kind="precomputed", predictions=args.predictions, produced_at=parse_date(args.produced_at))
    try:
        spec = MethodSpec(**fields)
    except pydantic.ValidationError as exc:
        raise TempoInputError("; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-') or 'method'}: {e['msg']}"
                                        for e in exc.errors())) from None
    spec = add_method(_archive(args), spec, protected=hidden_paths(_archive(args), default_artefacts_root()))
    partitions = _register_partition(spec.key)
    print(f"registered {spec.key} ({spec.kind}) in {_archive(args)}/methods.yaml; {partitions} partition added")
    return 0


def _list(args) -> int:
    from tempo_assets.core.methods.registry import load_registry

    registry = load_registry(_archive(args))
    if not registry.methods:
        print("no methods registered")
        return 0
    print("\t".join(("method", "kind", "trained_until", "where", "command", "timeout_s", "memory_gb")))
    for spec in registry.methods:
        bound = spec.training_bound.isoformat() if spec.training_bound else "undeclared"
        where = spec.dir if spec.kind == "command" else spec.predictions
        command = spec.command if spec.kind == "command" else f"(precomputed, produced at {spec.produced_at})"
        print("\t".join(map(str, (spec.key, spec.kind, bound, where, command,
                                  spec.timeout_s if spec.kind == "command" else "-",
                                  spec.memory_gb if spec.kind == "command" else "-"))))
    return 0


def _remove(args) -> int:
    from tempo_assets.core.methods.registry import remove_method

    spec = remove_method(_archive(args), args.name)
    print(f"removed {spec.key} from {_archive(args)}/methods.yaml (its stored predictions stay as history)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("method", help="register, list and remove third-party methods")
    commands = parser.add_subparsers(dest="method_command", metavar="ACTION")
    commands.required = True
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--archive", metavar="ARCHIVE", default=None,
                        help="release archive holding methods.yaml (default $TEMPO_ARCHIVE, else data/)")
    add = commands.add_parser("add", parents=[common], help="register NAME (a folder + command, or precomputed files)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--dir", metavar="DIR", help="the method's folder: mounted read-only, the command's cwd")
    add.add_argument("--command", metavar="CMD", help="shell command run in DIR inside the fence")
    add.add_argument("--predictions", metavar="DIR", help="folder of precomputed CAFA files DIR/<cutoff>.tsv")
    add.add_argument("--produced-at", metavar="DATE", help="when the precomputed files were produced")
    add.add_argument("--version", metavar="V", help="a version: registered as NAME@V beside other versions")
    add.add_argument("--trained-until", metavar="DATE", help="latest date of any data the method was trained on")
    add.add_argument("--timeout", type=int, metavar="S", help="wall-clock limit per cutoff in seconds (default 3600)")
    add.add_argument("--memory-gb", type=float, metavar="G", help="address-space limit in GiB (default 4)")
    add.set_defaults(func=_add)
    listing = commands.add_parser("list", parents=[common], help="list registered methods")
    listing.set_defaults(func=_list)
    remove = commands.add_parser("remove", parents=[common], help="unregister NAME (or NAME@V)")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(func=_remove)
