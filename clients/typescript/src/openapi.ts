// Generated from Charter's OpenAPI document by generate_types.py. Do not edit:
// regenerate with `python generate_types.py URL > src/openapi.ts` after an API change.

export const API_VERSION = "0.1.0";

export interface components {
  schemas: {
    Attachment: {
      kind: string;
      ref: string;
    };
    AttachmentRef: {
      kind: string;
      ref: string;
    };
    CallRequest: {
      tool: string;
      call_id: string;
      arguments?: {
        [key: string]: unknown;
      };
      arguments_json?: string;
      approval_id?: string | null;
      task_id?: string | null;
    };
    CatalogRunRequest: {
      session_id?: string | null;
      workflow?: string | null;
      inputs?: {
        [key: string]: components["schemas"]["InputFile"];
      };
    };
    ChatAgentOut: {
      name: string;
      description: string;
    };
    ChatAgentsOut: {
      agents: Array<components["schemas"]["ChatAgentOut"]>;
      defaultAgent: string | null;
      defaultProfile: string | null;
    };
    ChatBody: {
      message: string;
      conversationId?: string | null;
      profile?: string | null;
      agent?: string | null;
      attachments?: Array<components["schemas"]["Attachment"]>;
      timeRange?: {
        [key: string]: string;
      } | null;
      diagnosticsScope?: string | null;
    };
    ContextOut: {
      context_id: string;
      run_id: string;
      build_digest: string;
      principal: string;
      tenant: string;
      kind: string;
      profile: string;
      agent: string | null;
      objective: string | null;
      tools: Array<components["schemas"]["OfferedToolOut"]>;
      schema_digest: string;
      token_estimate: number;
      token_budget: number;
      unresolved: Array<string>;
      created_at: string;
      expires_at: string;
      format: "charter" | "openai" | "anthropic" | "mcp";
      tool_schemas: Array<{
        [key: string]: unknown;
      }>;
    };
    ContextRequest: {
      profile: string;
      agent?: string | null;
      objective?: string | null;
      attachments?: Array<components["schemas"]["AttachmentRef"]>;
      run?: string | null;
    };
    DecisionRequest: {
      reason?: string | null;
      tenant?: string | null;
    };
    DisclosedTool: {
      id: string;
      version: string;
    };
    DisclosureReport: {
      tools: Array<components["schemas"]["DisclosedTool"]>;
      schema_digest: string;
      attachment_ids?: Array<string>;
      tokens: number;
      tokens_estimated?: boolean;
      request_id?: string | null;
      model?: string | null;
    };
    EndRequest: {
      reason: string;
    };
    EnvelopeOut: {
      schema_version: number;
      call_id: string;
      status: string;
      data?: unknown;
      artifact_ids: Array<string>;
      warnings: Array<string>;
      error: components["schemas"]["ErrorOut"] | null;
      approval?: {
        [key: string]: unknown;
      } | null;
      metrics: {
        [key: string]: unknown;
      };
      trace: {
        [key: string]: string;
      } | null;
      context_id?: string | null;
      run_id?: string | null;
      tool?: string | null;
    };
    ErrorOut: {
      code: string;
      reason: string;
      message: string;
      retryable: boolean;
      details?: {
        [key: string]: unknown;
      } | null;
    };
    EventsOut: {
      run_id: string;
      events: Array<{
        [key: string]: unknown;
      }>;
      next_after: number;
    };
    HealthOut: {
      status: string;
      version: string;
    };
    InputFile: {
      path: string;
      media_type?: string;
      content_base64: string;
    };
    OfferedToolOut: {
      id: string;
      name: string;
      version: string;
      digest: string;
      effect: string;
      call_limit?: number | null;
    };
    Problem: {
      type: string;
      title: string;
      status: number;
      detail: string;
      code: string;
      reason: string;
      retryable?: boolean;
      errors?: Array<{
        [key: string]: unknown;
      }> | null;
    };
    ReadyOut: {
      status: string;
      checks: Array<{
        [key: string]: unknown;
      }>;
    };
    VerifyOut: {
      run_id: string;
      ok: boolean;
      events: number;
      head_seq: number | null;
      reason: string | null;
      seq: number | null;
      message: string | null;
      artifact_id?: string | null;
      path?: string | null;
    };
  };
}

/** Each operation: path and query parameters, JSON body and JSON answers. */
export interface operations {
  "GET /healthz": {
    path: {};
    query: {};
    body: never;
    response: components["schemas"]["HealthOut"];
  };
  "GET /metrics": {
    path: {};
    query: {};
    body: never;
    response: unknown;
  };
  "GET /readyz": {
    path: {};
    query: {};
    body: never;
    response: components["schemas"]["ReadyOut"];
  };
  "GET /v1/approvals": {
    path: {};
    query: { status?: "pending" | "approved" | "rejected" | "expired" | "consumed" | null; limit?: number };
    body: never;
    response: Array<{
      [key: string]: unknown;
    }>;
  };
  "GET /v1/approvals/{approval_id}": {
    path: { approval_id: string };
    query: { full?: boolean };
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/approvals/{approval_id}/approve": {
    path: { approval_id: string };
    query: {};
    body: components["schemas"]["DecisionRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/approvals/{approval_id}/reject": {
    path: { approval_id: string };
    query: {};
    body: components["schemas"]["DecisionRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/calls/{call_id}": {
    path: { call_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/calls/{context_id}/{call_id}": {
    path: { context_id: string; call_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/chat": {
    path: {};
    query: {};
    body: components["schemas"]["ChatBody"];
    response: unknown;
  };
  "GET /v1/chat/agents": {
    path: {};
    query: {};
    body: never;
    response: components["schemas"]["ChatAgentsOut"];
  };
  "GET /v1/chat/{conversation_id}/events": {
    path: { conversation_id: string };
    query: { after?: number };
    body: never;
    response: unknown;
  };
  "POST /v1/contexts": {
    path: {};
    query: { format?: "charter" | "openai" | "anthropic" | "mcp" };
    body: components["schemas"]["ContextRequest"];
    response: components["schemas"]["ContextOut"];
  };
  "GET /v1/contexts/{context_id}": {
    path: { context_id: string };
    query: { format?: "charter" | "openai" | "anthropic" | "mcp" };
    body: never;
    response: components["schemas"]["ContextOut"];
  };
  "POST /v1/contexts/{context_id}/calls": {
    path: { context_id: string };
    query: {};
    body: components["schemas"]["CallRequest"];
    response: components["schemas"]["EnvelopeOut"];
  };
  "POST /v1/contexts/{context_id}/disclosures": {
    path: { context_id: string };
    query: {};
    body: components["schemas"]["DisclosureReport"];
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/proposals": {
    path: {};
    query: { status?: "draft" | "validated" | "blocked" | "approved" | "rejected" | "applied" | "expired" | null; limit?: number };
    body: never;
    response: Array<{
      [key: string]: unknown;
    }>;
  };
  "GET /v1/proposals/{proposal_id}": {
    path: { proposal_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/proposals/{proposal_id}/apply": {
    path: { proposal_id: string };
    query: {};
    body: components["schemas"]["DecisionRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/proposals/{proposal_id}/approve": {
    path: { proposal_id: string };
    query: {};
    body: components["schemas"]["DecisionRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/proposals/{proposal_id}/reject": {
    path: { proposal_id: string };
    query: {};
    body: components["schemas"]["DecisionRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs": {
    path: {};
    query: { limit?: number };
    body: never;
    response: Array<{
      [key: string]: unknown;
    }>;
  };
  "POST /v1/runs": {
    path: {};
    query: {};
    body: components["schemas"]["CatalogRunRequest"] | null;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}": {
    path: { run_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/artifacts": {
    path: { run_id: string };
    query: {};
    body: never;
    response: Array<{
      [key: string]: unknown;
    }>;
  };
  "POST /v1/runs/{run_id}/artifacts": {
    path: { run_id: string };
    query: { name?: string | null; media_type?: string | null };
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/artifacts/{artifact_id}": {
    path: { run_id: string; artifact_id: string };
    query: {};
    body: never;
    response: unknown;
  };
  "POST /v1/runs/{run_id}/cancel": {
    path: { run_id: string };
    query: {};
    body: components["schemas"]["EndRequest"];
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/disclosures": {
    path: { run_id: string };
    query: { limit?: number };
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/events": {
    path: { run_id: string };
    query: { after?: number; limit?: number };
    body: never;
    response: components["schemas"]["EventsOut"];
  };
  "POST /v1/runs/{run_id}/fail": {
    path: { run_id: string };
    query: {};
    body: components["schemas"]["EndRequest"];
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/runs/{run_id}/finish": {
    path: { run_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/tasks": {
    path: { run_id: string };
    query: {};
    body: never;
    response: Array<{
      [key: string]: unknown;
    }>;
  };
  "GET /v1/runs/{run_id}/tasks/{task_id}": {
    path: { run_id: string; task_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/runs/{run_id}/tasks/{task_id}/complete": {
    path: { run_id: string; task_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/runs/{run_id}/tasks/{task_id}/handoff": {
    path: { run_id: string; task_id: string };
    query: {};
    body: {
      [key: string]: unknown;
    };
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/runs/{run_id}/tasks/{task_id}/start": {
    path: { run_id: string; task_id: string };
    query: {};
    body: never;
    response: {
      [key: string]: unknown;
    };
  };
  "POST /v1/runs/{run_id}/tasks/{task_id}/{action}": {
    path: { run_id: string; task_id: string; action: string };
    query: {};
    body: components["schemas"]["EndRequest"];
    response: {
      [key: string]: unknown;
    };
  };
  "GET /v1/runs/{run_id}/verify": {
    path: { run_id: string };
    query: {};
    body: never;
    response: components["schemas"]["VerifyOut"];
  };
}
