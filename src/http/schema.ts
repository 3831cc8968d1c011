/**
 * Schema helpers shared by the modules' model.ts files. Elysia's `t.Integer` coerces strings
 * (right for query and path values, wrong in a response document, where it reads as
 * "string or integer"): responses use TypeBox's plain integer.
 */
import { Type, type IntegerOptions } from "@sinclair/typebox";

export const ResponseInt = (options?: IntegerOptions) => Type.Integer(options);
