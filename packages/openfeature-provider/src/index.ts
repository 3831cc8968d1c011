/**
 * @flagsvc/openfeature-provider: an OpenFeature server provider that evaluates flagsvc's flags
 * in process, with flagsvc's own engine, kept current through the definitions stream.
 */
export { FlagsvcProvider, type EvaluationResult, type FlagsvcProviderOptions } from "./provider";
