// Starts `mimir lsp` for Python files: diagnostics, hovers, inlay shapes and quick fixes
// all come from the server; this file only launches it and hands it the documents.
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration("mimir");
  const [command, ...args] = config.get<string[]>("command", ["mimir", "lsp"]);
  const timeout = config.get<number | null>("z3Timeout", null);
  if (timeout !== null) {
    args.push("--z3-timeout", String(timeout));
  }
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "python" }],
    synchronize: {
      fileEvents: [
        vscode.workspace.createFileSystemWatcher("**/*.py"),
        vscode.workspace.createFileSystemWatcher("**/{pyproject,mimir}.toml"),
      ],
    },
  };
  client = new LanguageClient("mimir", "Mimir", serverOptions, clientOptions);
  context.subscriptions.push(client);
  await client.start();
}

export async function deactivate(): Promise<void> {
  if (client !== undefined) {
    await client.stop();
  }
}
